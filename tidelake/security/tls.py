"""TLS for SSL and SASL_SSL listeners, with Python's ``ssl``: Kafka's ``ssl.*`` broker settings
(PEM or PKCS12 keystore, PEM truststore, ``ssl.client.auth``) turned into one server ``SSLContext``
per listener. TLS 1.2 is the floor whatever ``ssl.enabled.protocols`` says.

Settings are looked up as Kafka does: ``listener.name.<listener>.ssl.X`` first, then ``ssl.X``."""
from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass
from typing import Callable

Lookup = Callable[[str], "str | None"]

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
DEFAULT_CLIENT_AUTH = "none"  # Kafka's ssl.client.auth default (the broker's config definition takes it from here)
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ValueError):
    """An ``ssl.*`` setting the broker cannot serve TLS with; the message names the key."""


def listener_setting(lookup: Lookup, listener: str, name: str) -> tuple[str, str | None]:
    """(key, value) of a per-listener setting: ``listener.name.<l>.<name>`` wins over ``<name>``."""
    key = f"listener.name.{listener.lower()}.{name}"
    value = lookup(key)
    if value is not None:
        return key, value
    return name, lookup(name)


def _pem_files(lookup: Lookup, listener: str) -> tuple[bytes, bytes | None]:
    """(certificate chain + key PEM, key password) from the keystore settings."""
    get = lambda name: listener_setting(lookup, listener, name)  # noqa: E731
    type_key, store_type = get("ssl.keystore.type")
    loc_key, location = get("ssl.keystore.location")
    _, chain = get("ssl.keystore.certificate.chain")
    _, key = get("ssl.keystore.key")
    _, key_password = get("ssl.key.password")
    _, store_password = get("ssl.keystore.password")
    password = (key_password or store_password or "").encode() or None
    if chain and key:  # inline PEM (Kafka's ssl.keystore.certificate.chain / ssl.keystore.key)
        return (chain.replace("\\n", "\n") + "\n" + key.replace("\\n", "\n")).encode(), password
    if not location:
        raise TlsConfigError(f"listener {listener}: ssl.keystore.location (or ssl.keystore.certificate.chain and "
                             "ssl.keystore.key) is required for TLS")
    store_type = (store_type or ("PKCS12" if location.endswith((".p12", ".pfx")) else "PEM")).upper()
    try:
        data = open(location, "rb").read()
    except OSError as e:
        raise TlsConfigError(f"{loc_key}: cannot read {location}: {e.strerror}") from None
    if store_type == "PEM":
        return data, password
    if store_type == "PKCS12":
        from cryptography.hazmat.primitives.serialization import (BestAvailableEncryption, Encoding, NoEncryption,
                                                                  PrivateFormat, pkcs12)
        try:
            pkey, cert, extra = pkcs12.load_key_and_certificates(data, (store_password or "").encode() or None)
        except ValueError as e:
            raise TlsConfigError(f"{loc_key}: cannot open PKCS12 keystore {location}: {e}") from None
        enc = BestAvailableEncryption(password) if password else NoEncryption()
        pem = pkey.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, enc)
        pem += b"".join(c.public_bytes(Encoding.PEM) for c in [cert, *(extra or [])] if c is not None)
        return pem, password
    raise TlsConfigError(f"{type_key}={store_type}: keystores are PEM or PKCS12 (convert a JKS one with keytool "
                         "-importkeystore -deststoretype PKCS12)")


@dataclass(frozen=True)
class TlsSettings:
    """One listener's ``ssl.*`` settings, read and checked; the TLS library builds its context from them."""
    listener: str
    keystore_pem: bytes  # private key and certificate chain
    key_password: bytes | None
    min_version: str  # TLSv1.2 or TLSv1.3
    max_version: str | None
    client_auth: str  # none, requested or required
    trust_file: str | None
    trust_pem: str | None  # ssl.truststore.certificates (inline)
    ciphers: str | None  # OpenSSL's cipher list syntax

    def trusted_pem_file(self) -> str | None:
        """A file with the trusted certificates, for the libraries that read one: the truststore's own, or the
        inline certificates written to a private temporary file (the caller deletes it)."""
        if self.trust_file or not self.trust_pem:
            return self.trust_file
        fd, path = tempfile.mkstemp(prefix="tidelake-truststore-", suffix=".pem")
        os.write(fd, self.trust_pem.encode())
        os.close(fd)
        return path


def tls_settings(lookup: Lookup, listener: str) -> TlsSettings:
    pem, password = _pem_files(lookup, listener)
    min_version, max_version = "TLSv1.2", None
    _, enabled = listener_setting(lookup, listener, "ssl.enabled.protocols")
    if enabled:
        versions = [v.strip() for v in enabled.split(",") if v.strip()]
        unknown = [v for v in versions if v not in _PROTOCOLS]
        if unknown or not versions:
            raise TlsConfigError(f"ssl.enabled.protocols={enabled}: only TLSv1.2 and TLSv1.3 are served")
        min_version = min(versions, key=lambda v: _PROTOCOLS[v])
        max_version = max(versions, key=lambda v: _PROTOCOLS[v])
    auth_key, client_auth = listener_setting(lookup, listener, "ssl.client.auth")
    client_auth = (DEFAULT_CLIENT_AUTH if client_auth is None else client_auth).lower()
    if client_auth not in CLIENT_AUTH:
        raise TlsConfigError(f"{auth_key}={client_auth}: expected required, requested or none")
    _, trust_location = listener_setting(lookup, listener, "ssl.truststore.location")
    _, trust_pem = listener_setting(lookup, listener, "ssl.truststore.certificates")
    if client_auth != "none" and not trust_location and not trust_pem:
        raise TlsConfigError(f"{auth_key}={client_auth} needs ssl.truststore.location (the CA that signs client "
                             "certificates)")
    _, ciphers = listener_setting(lookup, listener, "ssl.cipher.suites")
    return TlsSettings(listener, pem, password, min_version, max_version, client_auth, trust_location,
                       trust_pem.replace("\\n", "\n") if trust_pem else None,
                       ":".join(c.strip() for c in ciphers.split(",")) if ciphers else None)


def server_context(lookup: Lookup, listener: str) -> ssl.SSLContext:
    """The server ``SSLContext`` of one SSL/SASL_SSL listener (``ssl.client.auth=requested`` is served by
    ``requested_auth.py`` instead: Python's ssl refuses an untrusted certificate that Kafka lets in anonymous)."""
    settings = tls_settings(lookup, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _PROTOCOLS[settings.min_version]
    if settings.max_version:
        ctx.maximum_version = _PROTOCOLS[settings.max_version]
    # ssl wants files: write the PEM to a private temporary file for the moment it is read
    fd, path = tempfile.mkstemp(prefix="tidelake-keystore-", suffix=".pem")
    try:
        os.write(fd, settings.keystore_pem)
        os.close(fd)
        ctx.load_cert_chain(path, password=settings.key_password)
    except ssl.SSLError as e:
        raise TlsConfigError(f"listener {listener}: cannot load the keystore's certificate and key: {e}") from None
    finally:
        os.unlink(path)
    ctx.verify_mode = CLIENT_AUTH[settings.client_auth]
    if settings.trust_file:
        try:
            ctx.load_verify_locations(cafile=settings.trust_file)
        except (OSError, ssl.SSLError) as e:
            raise TlsConfigError(f"ssl.truststore.location: cannot load {settings.trust_file}: {e}") from None
    elif settings.trust_pem:
        ctx.load_verify_locations(cadata=settings.trust_pem)
    if settings.ciphers:
        try:
            ctx.set_ciphers(settings.ciphers)
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites={settings.ciphers}: no cipher OpenSSL knows") from None
    return ctx
