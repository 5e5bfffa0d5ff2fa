"""JAAS parsing and the broker-wide security settings (mechanisms, JAAS users, authorizer names)."""
from __future__ import annotations

import pytest

from tidelake.broker.config import BrokerConfig
from tidelake.broker.config_definitions import ConfigError
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
    """The broker's security as it starts: its configs given as ``--set`` (checked there), then read typed."""
    return BrokerSecurity(BrokerConfig.from_file(None, configs), {"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, tmp_path)


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
        ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "connections.max.reauth.ms": "-5"},
         "--set: connections.max.reauth.ms=-5 is below the minimum 0"),
    ]:
        with pytest.raises((ConfigError, SecurityConfigError), match=message):
            _security(tmp_path, **configs)
    sec = _security(tmp_path, **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "connections.max.reauth.ms": "60000",
                                 "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "5000"}, **jaas)
    assert sec.listeners["SASL_PLAINTEXT"].max_reauth_ms == {"PLAIN": 5000, "SCRAM-SHA-256": 60000}  # KIP-368
    for name in ["kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"]:
        sec = _security(tmp_path, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": name,
                                     "super.users": "User:admin;User:ops"})
        assert sec.authorizer is not None and sec.authorizer.super_users == {"User:admin", "User:ops"}


def test_tls_settings(tmp_path):
    import ssl

    from tidelake.security.tls import TlsConfigError, server_context
    from tls_certs import make_pki
    pki = make_pki(tmp_path / "pki")
    base = {"ssl.keystore.location": str(pki.server_keystore), "ssl.truststore.location": str(pki.ca)}
    for auth, mode in [("none", ssl.CERT_NONE), ("requested", ssl.CERT_OPTIONAL), ("required", ssl.CERT_REQUIRED)]:
        ctx = server_context({**base, "listener.name.ext.ssl.client.auth": auth}.get, "EXT")
        assert ctx.verify_mode == mode and ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    inline = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": pki.server_cert.read_text(),
              "ssl.keystore.key": pki.server_key.read_text()}
    assert server_context(inline.get, "SSL").verify_mode == ssl.CERT_NONE
    for configs, message in [({}, "ssl.keystore.location"),
                             ({**base, "ssl.enabled.protocols": "TLSv1.1"}, "only TLSv1.2 and TLSv1.3"),
                             ({**base, "ssl.keystore.type": "JKS"}, "keystores are PEM or PKCS12"),
                             ({"ssl.keystore.location": str(pki.server_keystore), "ssl.client.auth": "required"},
                              "needs ssl.truststore.location")]:
        with pytest.raises(TlsConfigError, match=message):
            server_context(configs.get, "SSL")
    with pytest.raises(SecurityConfigError, match="only DEFAULT"):
        BrokerSecurity(BrokerConfig({"ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"}), {}, tmp_path)


@pytest.mark.parametrize("key, value, message", [
    # a per-listener override is checked by its config's definition, and named as given
    ("listener.name.sasl_plaintext.plain.connections.max.reauth.ms", "soon",
     "listener.name.sasl_plaintext.plain.connections.max.reauth.ms='soon' is not a valid number"),
    ("listener.name.sasl_plaintext.allow.everyone.if.no.acl.found", "yes", "is not a boolean"),
    ("listener.name.ssl.ssl.client.auth", "sometimes", "allowed values are none, requested, required"),
    ("allow.everyone.if.no.acl.found", "yes", "allow.everyone.if.no.acl.found=yes is not a boolean"),
])
def test_a_bad_security_value_is_refused_at_start_naming_its_key(tmp_path, key, value, message):
    with pytest.raises(ConfigError, match=f"^--set: .*{message}"):
        _security(tmp_path, **{"sasl.enabled.mechanisms": "SCRAM-SHA-256", key: value})


def test_security_reads_its_settings_typed_with_the_definitions_defaults(tmp_path):
    """Unset, each setting is its definition's default (no reader writes one); set per listener, the override."""
    sec = _security(tmp_path, **{"sasl.enabled.mechanisms": "SCRAM-SHA-256",
                                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert sec.listeners["SASL_PLAINTEXT"].max_reauth_ms == {"SCRAM-SHA-256": 0}
    assert not sec.authorizer.allow_everyone_if_no_acl_found and sec.authorizer.super_users == frozenset()
    sec = _security(tmp_path, **{"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "scram-sha-512",
                                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                 "allow.everyone.if.no.acl.found": "TRUE"})
    assert sec.listeners["SASL_PLAINTEXT"].mechanisms == ("SCRAM-SHA-512",) and sec.authorizer.allow_everyone_if_no_acl_found
