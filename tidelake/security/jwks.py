"""The JSON Web Key Set a broker verifies OAUTHBEARER tokens with: fetched from
``sasl.oauthbearer.jwks.endpoint.url`` (``https:``/``http:`` or ``file:``) when the broker starts, then again every
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` and when a token names a key id the set lacks (at most once per
``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``), as Kafka's refreshing JWKS does. A refresh runs in a
short-lived thread: a login never waits on the key server, and the token that named the unknown key fails
(its client retries)."""
from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from dataclasses import dataclass

from joserfc.errors import JoseError
from joserfc.jwk import KeySet

log = logging.getLogger("tidelake.security.jwks")

FETCH_TIMEOUT_S = 10.0  # one fetch of the key set; a login never waits for it


class JwksError(ValueError):
    """The key set could not be fetched or is not a JWKS (the message names the URL)."""


URL_SETTING = "sasl.oauthbearer.jwks.endpoint.url"   # the broker's; the web console names its own option


def fetch_key_set(url: str, setting: str = URL_SETTING) -> KeySet:
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:  # file:, http:, https:
            document = json.loads(response.read())
        return KeySet.import_key_set(document)
    except (OSError, ValueError, JoseError, TypeError, KeyError) as e:
        raise JwksError(f"{setting}={url}: cannot read a JSON Web Key Set ({e})") from None


@dataclass(frozen=True)
class JwksSettings:
    url: str
    refresh_ms: int
    retry_backoff_ms: int
    setting: str = URL_SETTING   # what the URL was given as, for the error's message


class JwksKeySet:
    def __init__(self, settings: JwksSettings):
        self.settings = settings
        # at start: a broker (or console) that cannot verify tokens does not start
        self._keys = fetch_key_set(settings.url, settings.setting)
        self._fetched_at = time.monotonic()
        self._refresh_started_at = self._fetched_at
        self._refreshing = threading.Lock()

    @property
    def keys(self) -> KeySet:
        """The current key set; starts a refresh in the background when it is due."""
        if (time.monotonic() - self._fetched_at) * 1000 >= self.settings.refresh_ms:
            self.refresh_soon()
        return self._keys

    def has_key(self, kid: str | None) -> bool:
        return any(k.kid == kid for k in self._keys) if kid is not None else True

    def refresh_soon(self) -> None:
        """Fetch the set again in a thread, unless a fetch is running or one started within the backoff."""
        now = time.monotonic()
        if (now - self._refresh_started_at) * 1000 < self.settings.retry_backoff_ms or self._refreshing.locked():
            return
        self._refresh_started_at = now
        threading.Thread(target=self._refresh, name="jwks-refresh", daemon=True).start()

    def _refresh(self) -> None:
        with self._refreshing:
            try:
                self._keys = fetch_key_set(self.settings.url, self.settings.setting)
                self._fetched_at = time.monotonic()
            except JwksError as e:
                log.warning("%s; keeping the previous keys", e)
