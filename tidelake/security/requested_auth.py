"""``ssl.client.auth=requested``, as Kafka serves it: the broker asks for a client certificate; a client that
presents one its truststore trusts is that certificate's principal, and a client presenting none, or one that
does not verify, still connects, as ``User:ANONYMOUS`` (only ``required`` closes the door).

Python's ``ssl`` cannot do this: with ``CERT_OPTIONAL`` OpenSSL ends the handshake on an untrusted certificate,
and a verify callback is not exposed. pyOpenSSL exposes it, so these listeners run TLS through pyOpenSSL in
memory: ``TlsServerProtocol`` sits between the TCP socket and the connection's protocol (the broker's
``KafkaTransport``), and is that protocol's transport. The callback records whether the chain verified and lets
the handshake go on; the certificate is then reported only when it did."""
from __future__ import annotations

import asyncio
import logging
import os
import re

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, load_pem_private_key
from OpenSSL import SSL

from tidelake.security.tls import TlsConfigError, TlsSettings

log = logging.getLogger("tidelake.security.tls")

_VERSIONS = {"TLSv1.2": SSL.TLS1_2_VERSION, "TLSv1.3": SSL.TLS1_3_VERSION}
# ciphertext taken from pyOpenSSL's memory BIO per read (a Fetch response is written in few reads)
_BIO_READ_BYTES = 1 << 20
_RECV_BYTES = 1 << 18
_PRIVATE_KEY = re.compile(rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.+?-----END \1PRIVATE KEY-----", re.S)


class PeerCertificate:
    """What the handshake learnt of the client's certificate; ``getpeercert`` as Python's ``SSLObject`` answers it
    (DER with ``binary_form``), but only for a certificate that verified against the truststore."""

    def __init__(self) -> None:
        self.failed_checks = 0
        self.der: bytes | None = None

    def getpeercert(self, binary_form: bool = False) -> bytes | None:
        if not binary_form:
            raise ValueError("only the DER form is kept")
        return self.der if self.failed_checks == 0 else None


def _record_verification(connection: SSL.Connection, _cert, _errno: int, _depth: int, ok: int) -> bool:
    if not ok:
        connection.get_app_data().failed_checks += 1
    return True  # the handshake goes on; an unverified certificate names no one


def requested_auth_context(settings: TlsSettings) -> SSL.Context:
    """A pyOpenSSL server context for one listener with ``ssl.client.auth=requested``."""
    ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
    ctx.set_min_proto_version(_VERSIONS[settings.min_version])
    if settings.max_version:
        ctx.set_max_proto_version(_VERSIONS[settings.max_version])
    ctx.set_options(SSL.OP_NO_RENEGOTIATION)
    try:
        key_block = _PRIVATE_KEY.search(settings.keystore_pem)
        if key_block is None:
            raise ValueError("no private key")
        chain = x509.load_pem_x509_certificates(settings.keystore_pem)
        ctx.use_privatekey(load_pem_private_key(key_block.group(0), settings.key_password))
        ctx.use_certificate(chain[0])
        for cert in chain[1:]:
            ctx.add_extra_chain_cert(cert)
        ctx.check_privatekey()
    except (ValueError, TypeError, SSL.Error) as e:
        raise TlsConfigError(f"listener {settings.listener}: cannot load the keystore's certificate and key: "
                             f"{e}") from None
    trust = settings.trusted_pem_file()
    try:
        ctx.load_verify_locations(trust)
    except SSL.Error as e:
        raise TlsConfigError(f"ssl.truststore.location: cannot load {settings.trust_file or 'the certificates'}: "
                             f"{e}") from None
    finally:
        if trust != settings.trust_file:
            os.unlink(trust)
    if settings.ciphers:
        try:
            ctx.set_cipher_list(settings.ciphers.encode())
        except SSL.Error:
            raise TlsConfigError(f"ssl.cipher.suites={settings.ciphers}: no cipher OpenSSL knows") from None
    ctx.set_verify(SSL.VERIFY_PEER, _record_verification)
    return ctx


class TlsServerProtocol(asyncio.Protocol):
    """TLS over one accepted TCP connection, in pyOpenSSL's memory BIOs. To the TCP transport it is the protocol;
    to ``inner`` (made once the handshake is done) it is the transport: ``write``, ``writelines``, ``close``,
    reading pauses and ``get_extra_info`` (``ssl_object``: the ``PeerCertificate``)."""

    def __init__(self, context: SSL.Context, inner: asyncio.Protocol, handshake_timeout_s: float):
        self._tls = SSL.Connection(context, None)
        self._tls.set_accept_state()
        self._peer = PeerCertificate()
        self._tls.set_app_data(self._peer)
        self._inner = inner
        self._handshake_timeout_s = handshake_timeout_s
        self._tcp: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._ready = False
        self._closing = False

    # ------------------------------------------------------------------ the TCP side
    def connection_made(self, transport) -> None:
        self._tcp = transport
        self._timer = asyncio.get_running_loop().call_later(self._handshake_timeout_s, self._handshake_expired)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._tls.bio_write(data)
        if not self._ready and not self._handshake():
            return
        while not self._closing:
            try:
                chunk = self._tls.recv(_RECV_BYTES)
            except SSL.WantReadError:
                break
            except SSL.ZeroReturnError:  # the client's close_notify
                self.close()
                return
            except SSL.Error as e:
                log.debug("TLS connection from %s failed: %s", self._tcp.get_extra_info("peername"), e)
                self._abort()
                return
            self._inner.data_received(chunk)
        self._flush()

    def eof_received(self) -> bool:
        return False  # the TCP transport closes itself

    def connection_lost(self, exc) -> None:
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
        if self._ready:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._ready:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._ready:
            self._inner.resume_writing()

    def _handshake(self) -> bool:
        """Go on with the handshake; True once done (the inner protocol is then connected)."""
        try:
            self._tls.do_handshake()
        except SSL.WantReadError:
            self._flush()
            return False
        except SSL.Error as e:
            log.debug("TLS handshake with %s failed: %s", self._tcp.get_extra_info("peername"), e)
            self._flush()  # the alert
            self._abort()
            return False
        self._ready = True
        self._timer.cancel()
        cert = self._tls.get_peer_certificate(as_cryptography=True)
        if cert is not None:
            self._peer.der = cert.public_bytes(Encoding.DER)
        self._flush()
        self._inner.connection_made(self)
        return True

    def _handshake_expired(self) -> None:
        if not self._ready:
            log.debug("TLS handshake with %s timed out", self._tcp.get_extra_info("peername"))
            self._abort()

    def _flush(self) -> None:
        """Hand the TCP transport what TLS produced (records, handshake messages, alerts)."""
        out = []
        while True:
            try:
                data = self._tls.bio_read(_BIO_READ_BYTES)
            except SSL.WantReadError:
                break
            if not data:
                break
            out.append(data)
        if out and not self._tcp.is_closing():
            self._tcp.writelines(out)

    def _abort(self) -> None:
        self._closing = True
        self._tcp.close()

    # ------------------------------------------------------------------ the inner protocol's transport
    def write(self, data) -> None:
        if self._closing:
            return
        self._tls.sendall(data)
        self._flush()

    def writelines(self, chunks) -> None:
        if self._closing:
            return
        for chunk in chunks:
            self._tls.sendall(chunk)
        self._flush()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        try:
            self._tls.shutdown()
        except SSL.Error:
            pass
        self._flush()
        self._tcp.close()

    def is_closing(self) -> bool:
        return self._closing or self._tcp.is_closing()

    def pause_reading(self) -> None:
        self._tcp.pause_reading()

    def resume_reading(self) -> None:
        self._tcp.resume_reading()

    def get_extra_info(self, name: str, default=None):
        if name == "ssl_object":
            return self._peer
        return self._tcp.get_extra_info(name, default)
