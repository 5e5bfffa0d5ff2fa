"""The broker's security settings, resolved once at start: per listener its protocol, TLS context and
SASL mechanisms (with PLAIN's users from the JAAS config, OAUTHBEARER's token validator), and the broker-wide
authorizer.

Settings are Kafka's names (``listener.security.protocol.map``, ``ssl.*``, ``sasl.enabled.mechanisms``,
``listener.name.<l>.<mechanism>.sasl.jaas.config``, ``connections.max.reauth.ms``, ``authorizer.class.name``,
``super.users``, ``allow.everyone.if.no.acl.found``); ``lookup(name)`` reads the broker's config."""
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
from tidelake.security.store import SecurityStore
from tidelake.security.tls import TlsConfigError, listener_setting, server_context, tls_settings

Lookup = Callable[[str], "str | None"]
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


def listener_security(lookup: Lookup, name: str, protocol: str) -> ListenerSecurity:
    if protocol not in SECURITY_PROTOCOLS:
        raise SecurityConfigError(f"listener.security.protocol.map: {name} maps to {protocol}; expected one of "
                                  f"{', '.join(SECURITY_PROTOCOLS)}")
    context = requested = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            settings = tls_settings(lookup, name)
            if settings.client_auth == "requested":
                requested = requested_auth_context(settings)
            else:
                context = server_context(lookup, name)
        except TlsConfigError as e:
            raise SecurityConfigError(str(e)) from None
    if not protocol.startswith("SASL_"):
        return ListenerSecurity(name, protocol, context, requested_auth=requested)
    key, value = listener_setting(lookup, name, "sasl.enabled.mechanisms")
    mechanisms = tuple(m.strip().upper() for m in (value or "").split(",") if m.strip())
    unsupported = [m for m in mechanisms if m not in MECHANISMS]
    if unsupported or not mechanisms:
        raise SecurityConfigError(f"{key}={value}: listener {name} serves {', '.join(MECHANISMS)} "
                                  f"({', '.join(unsupported) or 'none'} unsupported); set sasl.enabled.mechanisms")
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        try:
            entry = listener_login(lookup, name, "PLAIN", PLAIN_LOGIN_MODULE,
                                   f'{PLAIN_LOGIN_MODULE} required user_<name>="<password>" ...;')
        except JaasError as e:
            raise SecurityConfigError(str(e)) from None
        users = entry.users()
    validator = None
    if "OAUTHBEARER" in mechanisms:
        try:
            validator = oauthbearer_validator(lookup, name)
        except OAuthConfigError as e:
            raise SecurityConfigError(str(e)) from None
    return ListenerSecurity(name, protocol, context, mechanisms, users, requested,
                            {m: _max_reauth_ms(lookup, name, m) for m in mechanisms}, validator)


def _max_reauth_ms(lookup: Lookup, listener: str, mechanism: str) -> int:
    """``listener.name.<l>.<mechanism>.connections.max.reauth.ms``, else ``connections.max.reauth.ms`` (Kafka's
    order); unset is 0, as the broker config's definition says."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms"
    value = lookup(key)
    if value is None:
        key, value = "connections.max.reauth.ms", lookup("connections.max.reauth.ms")
    try:
        ms = int(value or 0)
    except (TypeError, ValueError):
        raise SecurityConfigError(f"{key}={value}: expected a number of milliseconds") from None
    if ms < 0:
        raise SecurityConfigError(f"{key}={value}: must be 0 (no re-authentication) or more")
    return ms


class BrokerSecurity:
    """Listeners' security, the persisted credentials and ACLs, and the authorizer (None when
    ``authorizer.class.name`` is empty: every request is allowed, as in Kafka)."""

    def __init__(self, lookup: Lookup, listeners: Mapping[str, str], data_dir: Path,
                 clock_ms: Callable[[], int] = wall_ms):
        """``listeners``: listener name -> security protocol; ``clock_ms`` judges tokens' expiry."""
        self.clock_ms = clock_ms
        self.listeners = {name: listener_security(lookup, name, protocol) for name, protocol in listeners.items()}
        self.store = SecurityStore(data_dir)
        rules = (lookup("ssl.principal.mapping.rules") or "DEFAULT").strip()
        if rules != "DEFAULT":  # a mapping silently not applied would grant ACLs to the wrong names
            raise SecurityConfigError(f"ssl.principal.mapping.rules={rules}: only DEFAULT (the certificate's "
                                      "subject DN) is supported")
        if lookup("principal.builder.class"):
            raise SecurityConfigError("principal.builder.class: custom principal builders are not supported")
        class_name = (lookup("authorizer.class.name") or "").strip()
        self.authorizer: Authorizer | None = None
        if class_name:
            if class_name not in AUTHORIZER_CLASS_NAMES:
                raise SecurityConfigError(f"authorizer.class.name={class_name}: expected "
                                          f"{' or '.join(AUTHORIZER_CLASS_NAMES)}")
            allow = (lookup("allow.everyone.if.no.acl.found") or "false").strip().lower() == "true"
            self.authorizer = Authorizer(super_users(lookup("super.users")), allow, self.store.acls,
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
