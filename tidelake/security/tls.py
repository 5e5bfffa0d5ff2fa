"""TLS for SSL and SASL_SSL listeners, with Python's ``ssl``: Kafka's ``ssl.*`` broker settings
(PEM or PKCS12 keystore, PEM truststore, ``ssl.client.auth``) turned into one server ``SSLContext``
per listener. TLS 1.2 is the floor whatever ``ssl.enabled.protocols`` says.

Settings are looked up as Kafka does: ``listener.name.<listener>.ssl.X`` first, then ``ssl.X``."""
from __future__ import annotations

import os
import ssl
import tempfile
from typing import Callable

Lookup = Callable[[str], "str | None"]

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
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


def server_context(lookup: Lookup, listener: str) -> ssl.SSLContext:
    """The server ``SSLContext`` of one SSL/SASL_SSL listener."""
    pem, password = _pem_files(lookup, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _, enabled = listener_setting(lookup, listener, "ssl.enabled.protocols")
    if enabled:
        versions = [v.strip() for v in enabled.split(",") if v.strip()]
        unknown = [v for v in versions if v not in _PROTOCOLS]
        if unknown or not versions:
            raise TlsConfigError(f"ssl.enabled.protocols={enabled}: only TLSv1.2 and TLSv1.3 are served")
        ctx.minimum_version = min(_PROTOCOLS[v] for v in versions)
        ctx.maximum_version = max(_PROTOCOLS[v] for v in versions)
    # ssl wants files: write the PEM to a private temporary file for the moment it is read
    fd, path = tempfile.mkstemp(prefix="tidelake-keystore-", suffix=".pem")
    try:
        os.write(fd, pem)
        os.close(fd)
        ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as e:
        raise TlsConfigError(f"listener {listener}: cannot load the keystore's certificate and key: {e}") from None
    finally:
        os.unlink(path)
    auth_key, client_auth = listener_setting(lookup, listener, "ssl.client.auth")
    client_auth = (client_auth or "none").lower()
    if client_auth not in CLIENT_AUTH:
        raise TlsConfigError(f"{auth_key}={client_auth}: expected required, requested or none")
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    _, trust_location = listener_setting(lookup, listener, "ssl.truststore.location")
    _, trust_pem = listener_setting(lookup, listener, "ssl.truststore.certificates")
    if trust_location:
        try:
            ctx.load_verify_locations(cafile=trust_location)
        except (OSError, ssl.SSLError) as e:
            raise TlsConfigError(f"ssl.truststore.location: cannot load {trust_location}: {e}") from None
    elif trust_pem:
        ctx.load_verify_locations(cadata=trust_pem.replace("\\n", "\n"))
    elif client_auth != "none":
        raise TlsConfigError(f"{auth_key}={client_auth} needs ssl.truststore.location (the CA that signs client "
                             "certificates)")
    _, ciphers = listener_setting(lookup, listener, "ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",")))
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites={ciphers}: no cipher OpenSSL knows") from None
    return ctx
