"""A throwaway CA with a server certificate (for 127.0.0.1 / localhost) and client certificates,
made at test time with ``cryptography``; written as PEM files (and the server's key+chain as a
Kafka PEM keystore)."""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Pki:
    ca: Path  # CA certificate (truststore)
    server_keystore: Path  # server key + certificate chain, one PEM file
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_dn: str  # the client certificate's subject, RFC 2253
    other_ca: Path  # a CA that signed nothing here (a client trusting it must fail)


def _name(cn: str, org: str = "tidelake") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject, key, issuer, issuer_key, *, ca: bool = False, sans=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False, data_encipherment=False,
                                          key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, other_key = _key(), _key()
    ca_name = _name("tidelake test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    other_name = _name("unrelated CA")
    other = _cert(other_name, other_key, other_name, other_key, ca=True)
    server_key = _key()
    server = _cert(_name("localhost"), server_key, ca_name, ca_key,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key = _key()
    client = _cert(_name("alice-client"), client_key, ca_name, ca_key)
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)  # noqa: E731
    paths = {}
    for name, data in [("ca.pem", pem(ca)), ("other-ca.pem", pem(other)), ("server.pem", pem(server)),
                       ("server.key", _pem_key(server_key)), ("client.pem", pem(client)),
                       ("client.key", _pem_key(client_key)),
                       ("server-keystore.pem", _pem_key(server_key) + pem(server))]:
        (directory / name).write_bytes(data)
        paths[name] = directory / name
    return Pki(paths["ca.pem"], paths["server-keystore.pem"], paths["server.pem"], paths["server.key"],
               paths["client.pem"], paths["client.key"], client.subject.rfc4514_string(), paths["other-ca.pem"])


def make_untrusted_client(directory: Path, cn: str = "mallory-client") -> tuple[Path, Path, str]:
    """A self-signed client certificate no truststore here holds: (certificate, key, subject DN in RFC 2253)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = _key()
    cert = _cert(_name(cn, "elsewhere"), key, _name(cn, "elsewhere"), key)
    cert_path, key_path = directory / f"{cn}.pem", directory / f"{cn}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(_pem_key(key))
    return cert_path, key_path, cert.subject.rfc4514_string()
