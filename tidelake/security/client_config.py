"""Kafka's client security properties (what ``--command-config FILE`` holds for Kafka's tools, and
what Spark's ``kafka.*`` options carry) turned into librdkafka (confluent-kafka) and kafka-python
settings.

Understood: ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` (PlainLoginModule or
ScramLoginModule ``username``/``password``) or librdkafka's ``sasl.username``/``sasl.password``,
``ssl.truststore.location``/``ssl.truststore.certificates`` (PEM), ``ssl.keystore.location`` (PEM:
certificate chain and key in one file) or ``ssl.keystore.certificate.chain``/``ssl.keystore.key``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm``; librdkafka's own names
(``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``) pass through. Anything else
is refused with its name, so a typo never silently means "no security".

OAUTHBEARER: ``sasl.jaas.config`` naming OAuthBearerLoginModule with Kafka's unsecured login options
(``unsecuredLoginStringClaim_sub``, ``unsecuredLoginLifetimeSeconds``, ``unsecuredLoginStringClaim_scope``) becomes
librdkafka's unsecured JWT (kafka-python: the same token from ``UnsecuredTokenProvider``); with
``sasl.oauthbearer.token.endpoint.url`` and the module's ``clientId`` / ``clientSecret`` / ``scope`` options,
librdkafka's OIDC client-credentials login (not kafka-python's)."""
from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from kafka.net.sasl.oauth import AbstractTokenProvider

from tidelake.security.jaas import JaasError, parse_jaas

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
OAUTH_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_LIFETIME_S = 3600  # Kafka's unsecuredLoginLifetimeSeconds default
DEFAULT_PROTOCOL = "PLAINTEXT"  # Kafka's client security.protocol default
_PASS_THROUGH = {"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
                 "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "ssl.ca.pem",
                 "ssl.certificate.pem", "ssl.key.pem", "ssl.endpoint.identification.algorithm",
                 "sasl.oauthbearer.token.endpoint.url"}
_KAFKA_ONLY = {"sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates",
               "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.certificate.chain", "ssl.keystore.key",
               "ssl.keystore.password", "ssl.truststore.password", "ssl.protocol", "ssl.enabled.protocols"}
# settings a properties file may carry that are not about security; left to the command
_IGNORED = {"bootstrap.servers", "client.id", "request.timeout.ms"}


class ClientConfigError(ValueError):
    """A client property that cannot be used (the message names it)."""


def parse_client_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` file's ``key=value`` lines (``#``/``!`` comments)."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, _sep, value = line.partition("=")
        if not _sep:
            key, _sep, value = line.partition(":")
        out[key.strip()] = value.strip().replace("\\n", "\n")
    return out


def load_client_properties(path: str | Path) -> dict[str, str]:
    try:
        return parse_client_properties(Path(path).read_text())
    except OSError as e:
        raise ClientConfigError(f"cannot read {path}: {e.strerror}") from None


def librdkafka_config(props: Mapping[str, str]) -> dict[str, str]:
    """confluent-kafka settings for Kafka client security properties."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if key in _IGNORED:
            continue
        if key not in _PASS_THROUGH and key not in _KAFKA_ONLY:
            raise ClientConfigError(f"unknown client security property {key!r}")
        if key in _PASS_THROUGH:
            out[key] = value
    protocol = out.get("security.protocol", DEFAULT_PROTOCOL).upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(f"security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
    out["security.protocol"] = protocol
    if "sasl.mechanism" in out and out["sasl.mechanism"].upper() not in MECHANISMS:
        raise ClientConfigError(f"sasl.mechanism={out['sasl.mechanism']}: expected one of {', '.join(MECHANISMS)}")
    jaas = props.get("sasl.jaas.config")
    if "sasl.mechanism" in out and out["sasl.mechanism"].upper() == "OAUTHBEARER":
        out.update(_oauthbearer(jaas, out))
    elif jaas:
        try:
            options = parse_jaas(jaas).options
        except JaasError as e:
            raise ClientConfigError(f"sasl.jaas.config: {e}") from None
        if "username" not in options or "password" not in options:
            raise ClientConfigError("sasl.jaas.config: username=\"...\" and password=\"...\" are required")
        out.setdefault("sasl.username", options["username"])
        out.setdefault("sasl.password", options["password"])
    if protocol.startswith("SASL_"):
        out.setdefault("sasl.mechanism", "PLAIN")  # Kafka's client default (GSSAPI aside)
        if "sasl.username" not in out and out["sasl.mechanism"].upper() != "OAUTHBEARER":
            raise ClientConfigError(f"security.protocol={protocol} needs sasl.jaas.config (or sasl.username and "
                                    "sasl.password)")
    for kind in ("truststore", "keystore"):
        store_type = props.get(f"ssl.{kind}.type", "PEM").upper()
        if store_type != "PEM" and (props.get(f"ssl.{kind}.location")):
            raise ClientConfigError(f"ssl.{kind}.type={store_type}: only PEM stores are read (or use librdkafka's "
                                    "ssl.ca.location / ssl.certificate.location / ssl.key.location)")
    if props.get("ssl.truststore.location"):
        out.setdefault("ssl.ca.location", props["ssl.truststore.location"])
    if props.get("ssl.truststore.certificates"):
        out.setdefault("ssl.ca.pem", props["ssl.truststore.certificates"])
    if props.get("ssl.keystore.location"):  # one PEM file with the certificate chain and the key
        out.setdefault("ssl.certificate.location", props["ssl.keystore.location"])
        out.setdefault("ssl.key.location", props["ssl.keystore.location"])
    if props.get("ssl.keystore.certificate.chain"):
        out.setdefault("ssl.certificate.pem", props["ssl.keystore.certificate.chain"])
    if props.get("ssl.keystore.key"):
        out.setdefault("ssl.key.pem", props["ssl.keystore.key"])
    if out.get("ssl.endpoint.identification.algorithm") == "":  # Java's "off"
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out


@dataclass(frozen=True)
class UnsecuredLogin:
    """Kafka's unsecured OAUTHBEARER login options (OAuthBearerUnsecuredLoginCallbackHandler)."""
    principal: str
    lifetime_s: int | None
    scopes: tuple[str, ...]


def _oauth_options(jaas: str | None) -> dict[str, str]:
    try:
        entry = parse_jaas(jaas) if jaas else None
    except JaasError as e:
        raise ClientConfigError(f"sasl.jaas.config: {e}") from None
    if entry is None or entry.login_module != OAUTH_LOGIN_MODULE:
        raise ClientConfigError(f"sasl.mechanism=OAUTHBEARER needs sasl.jaas.config={OAUTH_LOGIN_MODULE} required ...;")
    return entry.options


def _unsecured_login(options: Mapping[str, str]) -> UnsecuredLogin:
    sub = options.get("unsecuredLoginStringClaim_sub")
    if not sub:
        raise ClientConfigError("sasl.jaas.config: unsecuredLoginStringClaim_sub=\"...\" (the principal) is required "
                                "for an unsecured token, or set sasl.oauthbearer.token.endpoint.url")
    scopes = [options["unsecuredLoginStringClaim_scope"]] if "unsecuredLoginStringClaim_scope" in options else []
    listed = options.get("unsecuredLoginListClaim_scope")
    if listed:  # Kafka's list claim: its first character is the delimiter
        scopes += [v for v in listed[1:].split(listed[0]) if v]
    lifetime = options.get("unsecuredLoginLifetimeSeconds")
    try:
        lifetime_s = int(lifetime) if lifetime is not None else None
    except ValueError:
        raise ClientConfigError(f"sasl.jaas.config: unsecuredLoginLifetimeSeconds={lifetime}: expected seconds") \
            from None
    return UnsecuredLogin(sub, lifetime_s, tuple(scopes))


def _oauthbearer(jaas: str | None, out: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's OAUTHBEARER settings for Kafka's OAuthBearerLoginModule options."""
    options = _oauth_options(jaas)
    if "sasl.oauthbearer.token.endpoint.url" in out:  # an OIDC provider's client-credentials grant
        missing = [o for o in ("clientId", "clientSecret") if o not in options]
        if missing:
            raise ClientConfigError(f"sasl.jaas.config: {' and '.join(missing)} are required with "
                                    "sasl.oauthbearer.token.endpoint.url")
        oidc = {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": options["clientId"],
                "sasl.oauthbearer.client.secret": options["clientSecret"]}
        if "scope" in options:
            oidc["sasl.oauthbearer.scope"] = options["scope"]
        return oidc
    login = _unsecured_login(options)
    claims = [f"principal={login.principal}"]
    if login.lifetime_s is not None:
        claims.append(f"lifeSeconds={login.lifetime_s}")
    if login.scopes:
        claims.append(f"scope={','.join(login.scopes)}")  # librdkafka: a comma-separated scope list
    return {"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": " ".join(claims)}


class UnsecuredTokenProvider(AbstractTokenProvider):
    """kafka-python's OAUTHBEARER token: an unsigned JWS as Kafka's unsecured login handler makes it."""

    def __init__(self, login: UnsecuredLogin):
        super().__init__()
        self.login = login

    def token(self) -> str:
        now = time.time()
        claims: dict[str, object] = {"sub": self.login.principal, "iat": now,
                                     "exp": now + (self.login.lifetime_s or UNSECURED_LIFETIME_S)}
        if self.login.scopes:
            claims["scope"] = list(self.login.scopes)
        part = lambda value: base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()  # noqa: E731
        return f"{part({'alg': 'none'})}.{part(claims)}."


def kafka_python_config(props: Mapping[str, str]) -> dict[str, object]:
    """kafka-python (and aiokafka-like) keyword settings for the same properties."""
    rd = librdkafka_config(props)
    out: dict[str, object] = {"security_protocol": rd["security.protocol"]}
    if "sasl.mechanism" in rd and rd["sasl.mechanism"].upper() == "OAUTHBEARER":
        if "sasl.oauthbearer.token.endpoint.url" in rd:
            raise ClientConfigError("sasl.oauthbearer.token.endpoint.url: the kafka-python based commands take only "
                                    "unsecured OAUTHBEARER tokens (unsecuredLoginStringClaim_sub)")
        out.update(sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=UnsecuredTokenProvider(
            _unsecured_login(_oauth_options(props.get("sasl.jaas.config")))))
    elif "sasl.mechanism" in rd:
        missing = [k for k in ("sasl.username", "sasl.password") if k not in rd]
        if missing:
            raise ClientConfigError(f"sasl.mechanism={rd['sasl.mechanism']} needs {' and '.join(missing)} (or "
                                    "sasl.jaas.config with username and password)")
        out.update(sasl_mechanism=rd["sasl.mechanism"].upper(), sasl_plain_username=rd["sasl.username"],
                   sasl_plain_password=rd["sasl.password"])
    for pem_key in ("ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"):
        if pem_key in rd:
            raise ClientConfigError(f"{pem_key} (inline PEM) is not supported by kafka-python; use file locations")
    if "ssl.ca.location" in rd:
        out["ssl_cafile"] = rd["ssl.ca.location"]
    if "ssl.certificate.location" in rd:
        out["ssl_certfile"] = rd["ssl.certificate.location"]
    if "ssl.key.location" in rd:
        out["ssl_keyfile"] = rd["ssl.key.location"]
    if "ssl.key.password" in rd:
        out["ssl_password"] = rd["ssl.key.password"]
    if rd.get("ssl.endpoint.identification.algorithm") == "none":
        out["ssl_check_hostname"] = False
    return out


def with_librdkafka_security(config: Mapping[str, object]) -> dict[str, object]:
    """A librdkafka config in which Kafka's (Java client's) security property names, if any, are
    replaced by librdkafka's (Spark's ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``...);
    every other setting is kept as it is."""
    security = {k: str(v) for k, v in config.items() if k in _KAFKA_ONLY or k in _PASS_THROUGH}
    if not any(k in _KAFKA_ONLY for k in security):
        return dict(config)
    rest = {k: v for k, v in config.items() if k not in security}
    return {**rest, **librdkafka_config(security)}
