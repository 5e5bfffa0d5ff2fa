"""``Storage`` and ``open_storage``: see the package docstring."""
from __future__ import annotations

import os
from typing import Mapping
from urllib.parse import urlparse

import obstore
from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError
from obstore.store import LocalStore, MemoryStore, S3Store

# AWS's standard environment names for what an S3 store needs (table/pipeline options win over them)
_S3_ENV = {"endpoint": "AWS_ENDPOINT_URL", "region": "AWS_REGION", "access_key_id": "AWS_ACCESS_KEY_ID",
           "secret_access_key": "AWS_SECRET_ACCESS_KEY", "session_token": "AWS_SESSION_TOKEN"}


class Storage:
    """Files under one root, addressed by paths relative to it ('_tidelake_log/00000000000000000001.json')."""

    def __init__(self, store, url: str):
        self._store = store
        self.url = url

    def read(self, path: str) -> bytes:
        """The whole file; FileNotFoundError if there is none."""
        try:
            return obstore.get(self._store, path).bytes().to_bytes()
        except (NotFoundError, FileNotFoundError) as e:
            raise FileNotFoundError(f"{self.url}/{path}") from e

    def write(self, path: str, data: bytes) -> None:
        """Create or replace the file, whole (readers see the old or the new content, never a mix)."""
        obstore.put(self._store, path, data)

    def create(self, path: str, data: bytes) -> bool:
        """Put-if-absent: True if this call created the file, False if it already existed."""
        try:
            obstore.put(self._store, path, data, mode="create")
            return True
        except (AlreadyExistsError, PreconditionError, FileExistsError):
            return False

    def exists(self, path: str) -> bool:
        try:
            obstore.head(self._store, path)
            return True
        except (NotFoundError, FileNotFoundError):
            return False

    def size(self, path: str) -> int:
        try:
            return obstore.head(self._store, path)["size"]
        except (NotFoundError, FileNotFoundError) as e:
            raise FileNotFoundError(f"{self.url}/{path}") from e

    def list(self, prefix: str = "") -> list[str]:
        """Every file path under ``prefix`` (a folder, e.g. '_tidelake_log'), sorted."""
        prefix = prefix.rstrip("/")
        out = []
        for chunk in obstore.list(self._store, prefix or None):
            out.extend(meta["path"] for meta in chunk)
        return sorted(out)

    def delete(self, path: str) -> None:
        """Remove the file; a missing one is not an error (deletes are retried by retention)."""
        try:
            obstore.delete(self._store, path)
        except (NotFoundError, FileNotFoundError):
            pass

    def __repr__(self) -> str:
        return f"Storage({self.url!r})"


def open_storage(url: str, options: Mapping[str, str] | None = None) -> Storage:
    """The storage at ``url``: a bare path or file://, s3://bucket[/prefix] (``options``: endpoint, region,
    access_key_id, secret_access_key, session_token, allow_http; else AWS's environment variables), or
    memory:// (a fresh in-memory store, for tests)."""
    options = dict(options or {})
    parsed = urlparse(url)
    if parsed.scheme == "memory":
        return Storage(MemoryStore(), url)
    if parsed.scheme == "s3":
        settings = {k: options.get(k) or os.environ.get(env) for k, env in _S3_ENV.items()}
        settings = {k: v for k, v in settings.items() if v}
        endpoint = settings.get("endpoint", "")
        allow_http = str(options.get("allow_http", endpoint.startswith("http://"))).lower() == "true"
        prefix = parsed.path.strip("/") or None
        store = S3Store(parsed.netloc, prefix=prefix, client_options={"allow_http": allow_http},
                        **{k: v for k, v in settings.items()})
        return Storage(store, url.rstrip("/"))
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"unsupported storage URL {url!r} (use a path, file://, s3:// or memory://)")
    path = os.path.abspath(parsed.path if parsed.scheme == "file" else url)
    os.makedirs(path, exist_ok=True)
    return Storage(LocalStore(path), path)
