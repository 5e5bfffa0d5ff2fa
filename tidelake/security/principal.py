"""Kafka principals: ``User:<name>`` strings, as Kafka's ``KafkaPrincipal.toString()`` writes them.

A PLAINTEXT connection (and SSL without a client certificate) is ``User:ANONYMOUS``; an SSL client
certificate gives ``User:<subject DN>`` in RFC 2253 form (``ssl.principal.mapping.rules=DEFAULT``);
a SASL login gives ``User:<username>``."""
from __future__ import annotations

USER_TYPE = "User"
ANONYMOUS = "User:ANONYMOUS"
WILDCARD_PRINCIPAL = "User:*"


def user(name: str) -> str:
    return f"{USER_TYPE}:{name}"


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name); ValueError if it is not one (Kafka: INVALID_REQUEST)."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"principal must be TYPE:NAME, got {text!r}")
    return kind, name


def principal_from_certificate(der: bytes | None) -> str:
    """The principal of a TLS peer: its certificate's subject DN (RFC 2253, as Java's
    ``X500Principal.getName()``), or ANONYMOUS without a certificate."""
    if not der:
        return ANONYMOUS
    from cryptography import x509
    cert = x509.load_der_x509_certificate(der)
    return user(cert.subject.rfc4514_string())


def super_users(value: str | None) -> frozenset[str]:
    """``super.users=User:admin;User:alice`` (semicolon-separated, as Kafka)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())
