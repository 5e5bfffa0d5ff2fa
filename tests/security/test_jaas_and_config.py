"""JAAS parsing and the broker-wide security settings (mechanisms, JAAS users, authorizer names)."""
from __future__ import annotations

import pytest

from tidelake.security.config import BrokerSecurity, SecurityConfigError
from tidelake.security.jaas import JaasError, parse_jaas

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="al\\"ice";')


def test_jaas_users():
    entry = parse_jaas(JAAS)
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.users() == {"admin": "admin-secret", "alice": 'al"ice'}
    for bad in ["no semicolon", "x required a=\"b\"", "X notaflag a=b;", 'X required a="b" ???;']:
        with pytest.raises(JaasError):
            parse_jaas(bad)


def _security(tmp_path, **configs):
    return BrokerSecurity(configs.get, {"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, tmp_path)


def test_security_settings_are_checked(tmp_path):
    jaas = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
    sec = _security(tmp_path, **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"}, **jaas)
    assert sec.listeners["SASL_PLAINTEXT"].plain_users["admin"] == "admin-secret"
    assert sec.authorizer is None
    for configs, message in [
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI unsupported"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "plain.sasl.jaas.config is required"),
        ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "authorizer.class.name": "my.Authorizer"},
         "authorizer.class.name=my.Authorizer"),
        ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "connections.max.reauth.ms": "60000"},
         "re-authentication .KIP-368. is not supported"),
    ]:
        with pytest.raises(SecurityConfigError, match=message):
            _security(tmp_path, **configs)
    for name in ["kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"]:
        sec = _security(tmp_path, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": name,
                                     "super.users": "User:admin;User:ops"})
        assert sec.authorizer is not None and sec.authorizer.super_users == {"User:admin", "User:ops"}
