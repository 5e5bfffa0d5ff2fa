"""Kafka's client security properties (what ``--command-config FILE`` holds for Kafka's tools, and
what Spark's ``kafka.*`` options carry) turned into librdkafka (confluent-kafka) and kafka-python
settings.

Understood: ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` (PlainLoginModule or
ScramLoginModule ``username``/``password``) or librdkafka's ``sasl.username``/``sasl.password``,
``ssl.truststore.location``/``ssl.truststore.certificates`` (PEM), ``ssl.keystore.location`` (PEM:
certificate chain and key in one file) or ``ssl.keystore.certificate.chain``/``ssl.keystore.key``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm``; librdkafka's own names
(``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``) pass through. Anything else
is refused with its name, so a typo never silently means "no security"."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from tidelake.security.jaas import JaasError, parse_jaas

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_PASS_THROUGH = {"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
                 "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "ssl.ca.pem",
                 "ssl.certificate.pem", "ssl.key.pem", "ssl.endpoint.identification.algorithm"}
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
    protocol = out.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(f"security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
    out["security.protocol"] = protocol
    if "sasl.mechanism" in out and out["sasl.mechanism"].upper() not in MECHANISMS:
        raise ClientConfigError(f"sasl.mechanism={out['sasl.mechanism']}: expected one of {', '.join(MECHANISMS)}")
    jaas = props.get("sasl.jaas.config")
    if jaas:
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
        if "sasl.username" not in out:
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


def kafka_python_config(props: Mapping[str, str]) -> dict[str, object]:
    """kafka-python (and aiokafka-like) keyword settings for the same properties."""
    rd = librdkafka_config(props)
    out: dict[str, object] = {"security_protocol": rd["security.protocol"]}
    if "sasl.mechanism" in rd:
        out.update(sasl_mechanism=rd["sasl.mechanism"].upper(), sasl_plain_username=rd["sasl.username"],
                   sasl_plain_password=rd.get("sasl.password", ""))
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
