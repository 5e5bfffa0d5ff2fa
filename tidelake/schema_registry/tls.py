"""TLS of the REST listener (``listeners=https://...``) with the broker's ``ssl.*`` settings, built by
``security/tls.py`` exactly as a broker's SSL listener is (PEM or PKCS12 keystore, truststore, ``ssl.client.auth``);
and the client side used to forward writes to a primary listening on https (trusting ``ssl.truststore.location``)."""
from __future__ import annotations

import ssl

import uvicorn

from tidelake.schema_registry.settings import RegistrySettings, SettingsError
from tidelake.security.tls import TlsConfigError, server_context


def server_tls_context(settings: RegistrySettings) -> ssl.SSLContext:
    try:
        return server_context(settings.values.get, "https")
    except TlsConfigError as e:
        raise SettingsError(str(e)) from None


def forwarding_tls_context(settings: RegistrySettings) -> ssl.SSLContext:
    trust = settings.values.get("ssl.truststore.location")
    try:
        return ssl.create_default_context(cafile=trust) if trust else ssl.create_default_context()
    except (OSError, ssl.SSLError) as e:
        raise SettingsError(f"ssl.truststore.location: cannot load {trust}: {e}") from None


class TlsUvicornConfig(uvicorn.Config):
    """uvicorn's configuration serving with a ready ``SSLContext`` (uvicorn itself only takes file names)."""

    def __init__(self, app, ssl_context: ssl.SSLContext | None, **kwargs):
        super().__init__(app, **kwargs)
        self._ssl_context = ssl_context

    def load(self) -> None:
        super().load()
        if self._ssl_context is not None:
            self.ssl = self._ssl_context
