"""The broker's security settings, resolved once at start: per listener its protocol, TLS context and
SASL mechanisms (with PLAIN's users from the JAAS config, OAUTHBEARER's token validator), and the broker-wide
authorizer.

Settings are Kafka's names (``listener.security.protocol.map``, ``ssl.*``, ``sasl.enabled.mechanisms``,
``listener.name.<l>.<mechanism>.sasl.jaas.config``, ``connections.max.reauth.ms``, ``authorizer.class.name``,
``super.users``, ``allow.everyone.if.no.acl.found``), read typed through ``BrokerSettings`` (settings.py): their
types, defaults and checks are the broker config definitions'; a bad value never gets this far."""
from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from OpenSSL import SSL

from tidelake.security.acl.authorizer import AUTHORIZER_CLASS_NAMES, Authorizer
from tidelake.clock import wall_ms
from tidelake.security.jaas import JaasError, listener_login
from tidelake.security.oauth_config import OAuthConfigError, oauthbearer_validator
from tidelake.security.oauth_tokens import TokenValidator
from tidelake.security.principal import super_users
from tidelake.security.sasl import MECHANISMS
from tidelake.security.sasl.oauthbearer import OAuthBearerServer
from tidelake.security.sasl.plain import PlainServer
from tidelake.security.sasl.scram import HASHES, ScramServer
from tidelake.security.requested_auth import requested_auth_context
from tidelake.security.settings import BrokerSettings, listener_key
from tidelake.security.store import SecurityStore
from tidelake.security.tls import TlsConfigError, server_context, tls_settings

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class SecurityConfigError(ValueError):
    """A security setting the broker cannot start with (the message names the key)."""


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)
    # ssl.client.auth=requested: TLS through pyOpenSSL (requested_auth.py), ssl_context is None
    requested_auth: SSL.Context | None = None
    # KIP-368 per mechanism: connections.max.reauth.ms (0: a session lasts as long as its connection)
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    oauthbearer: TokenValidator | None = None  # OAUTHBEARER's token validator (oauth_config.py)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def listener_security(settings: BrokerSettings, name: str, protocol: str) -> ListenerSecurity:
    if protocol not in SECURITY_PROTOCOLS:
        raise SecurityConfigError(f"listener.security.protocol.map: {name} maps to {protocol}; expected one of "
                                  f"{', '.join(SECURITY_PROTOCOLS)}")
    context = requested = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            tls = tls_settings(settings.get, name)
            if tls.client_auth == "requested":
                requested = requested_auth_context(tls)
            else:
                context = server_context(settings.get, name)
        except TlsConfigError as e:
            raise SecurityConfigError(str(e)) from None
    if not protocol.startswith("SASL_"):
        return ListenerSecurity(name, protocol, context, requested_auth=requested)
    key = listener_key(settings, name, "sasl.enabled.mechanisms")
    mechanisms = tuple(m.upper() for m in settings.get_list(key))
    unsupported = [m for m in mechanisms if m not in MECHANISMS]
    if unsupported or not mechanisms:
        raise SecurityConfigError(f"{key}={settings.get(key)}: listener {name} serves {', '.join(MECHANISMS)} "
                                  f"({', '.join(unsupported) or 'none'} unsupported); set sasl.enabled.mechanisms")
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        try:
            entry = listener_login(settings.get, name, "PLAIN", PLAIN_LOGIN_MODULE,
                                   f'{PLAIN_LOGIN_MODULE} required user_<name>="<password>" ...;')
        except JaasError as e:
            raise SecurityConfigError(str(e)) from None
        users = entry.users()
    validator = None
    if "OAUTHBEARER" in mechanisms:
        try:
            validator = oauthbearer_validator(settings, name)
        except OAuthConfigError as e:
            raise SecurityConfigError(str(e)) from None
    return ListenerSecurity(name, protocol, context, mechanisms, users, requested,
                            {m: settings.get_int(listener_key(settings, name, "connections.max.reauth.ms", m))
                             for m in mechanisms}, validator)


class BrokerSecurity:
    """Listeners' security, the persisted credentials and ACLs, and the authorizer (None when
    ``authorizer.class.name`` is empty: every request is allowed, as in Kafka)."""

    def __init__(self, settings: BrokerSettings, listeners: Mapping[str, str], data_dir: Path,
                 clock_ms: Callable[[], int] = wall_ms):
        """``listeners``: listener name -> security protocol; ``clock_ms`` judges tokens' expiry."""
        self.clock_ms = clock_ms
        self.listeners = {name: listener_security(settings, name, protocol) for name, protocol in listeners.items()}
        self.store = SecurityStore(data_dir)
        rules = settings.get_string("ssl.principal.mapping.rules")
        if rules != "DEFAULT":  # a mapping silently not applied would grant ACLs to the wrong names
            raise SecurityConfigError(f"ssl.principal.mapping.rules={rules}: only DEFAULT (the certificate's "
                                      "subject DN) is supported")
        if settings.get_optional("principal.builder.class"):
            raise SecurityConfigError("principal.builder.class: custom principal builders are not supported")
        class_name = settings.get_string("authorizer.class.name")
        self.authorizer: Authorizer | None = None
        if class_name:
            if class_name not in AUTHORIZER_CLASS_NAMES:
                raise SecurityConfigError(f"authorizer.class.name={class_name}: expected "
                                          f"{' or '.join(AUTHORIZER_CLASS_NAMES)}")
            self.authorizer = Authorizer(super_users(settings.get_optional("super.users")),
                                         settings.get_bool("allow.everyone.if.no.acl.found"), self.store.acls,
                                         on_change=self.store.set_acls)

    def sasl_server(self, listener: str, mechanism: str):
        """A fresh server for one SASL exchange, or None if the listener does not enable ``mechanism``."""
        sec = self.listeners.get(listener)
        if sec is None or mechanism not in sec.mechanisms:
            return None
        if mechanism == "PLAIN":
            return PlainServer(sec.plain_users)
        if mechanism in HASHES:
            return ScramServer(mechanism, lambda user: self.store.credential(user, mechanism))
        if mechanism == "OAUTHBEARER":
            return OAuthBearerServer(sec.oauthbearer, self.clock_ms)
        return None
