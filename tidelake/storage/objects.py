"""``ObjectStorage``: files on S3 (or an S3-compatible server) and in memory, through obstore (Rust's
object_store).

Put-if-absent is S3's conditional write, ``If-None-Match: *``: the server itself refuses the second
PUT of a key (412), so exactly one of several writers on any machines wins, with no lock service.
AWS S3 (since August 2024), MinIO and Cloudflare R2 honour it; a store that ignores the header would
let two concurrent writers both "win" a version (docs/GUARANTEES.md, "The table").
"""
from __future__ import annotations

import os
import re
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError, PreconditionError
from obstore.store import MemoryStore, S3Store

from .storage import FileInfo, Storage, StorageError

# options a table or a pipeline may give, and AWS's standard environment variables for each (options win)
S3_OPTIONS: dict[str, tuple[str, ...]] = {
    "endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "access_key_id": ("AWS_ACCESS_KEY_ID",),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "session_token": ("AWS_SESSION_TOKEN",),
    "allow_http": ("AWS_ALLOW_HTTP",),
}
# a store that does not answer fails an operation within about this long (obstore's default keeps retrying 3 min)
CONNECT_TIMEOUT = "5s"
REQUEST_TIMEOUT = "60s"
_S3_CODE = re.compile(r"<Code>([^<]*)</Code>")
_S3_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")
CONFLICT_RETRIES = 5
RETRY = {"max_retries": 4, "backoff": {"init_backoff": timedelta(milliseconds=100),
                                       "max_backoff": timedelta(seconds=2), "base": 2},
         "retry_timeout": timedelta(seconds=20)}


class ObjectStorage(Storage):
    def __init__(self, store, url: str, options: Mapping[str, str] | None = None):
        self._store = store
        self.url = url
        self.options = dict(options or {})

    def __reduce__(self):
        return (_reopen, (self.url, self.options))

    def _failed(self, path: str, e: Exception) -> StorageError:
        """One line: the file, then S3's error code and message, or the client's first line."""
        text = str(e).strip()
        code, message = _S3_CODE.search(text), _S3_MESSAGE.search(text)
        if code:
            reason = f"{code.group(1)}: {message.group(1)}" if message else code.group(1)
        else:
            reason = text.splitlines()[0] if text else type(e).__name__
        return StorageError(f"{self.location(path)}: {reason[:300]}")

    def _missing(self, path: str, e: Exception) -> Exception:
        """A NotFound answer: FileNotFoundError for a missing file, StorageError for a missing bucket."""
        if "NoSuchBucket" in str(e):
            return self._failed(path, e)
        return FileNotFoundError(2, "No such file", self.location(path))

    def read(self, path: str) -> bytes:
        try:
            return obstore.get(self._store, path).bytes().to_bytes()
        except (NotFoundError, FileNotFoundError) as e:
            raise self._missing(path, e) from e
        except BaseError as e:
            raise self._failed(path, e) from e

    def read_range(self, path: str, start: int, length: int) -> bytes:
        try:
            return obstore.get_range(self._store, path, start=start, length=length).to_bytes()
        except (NotFoundError, FileNotFoundError) as e:
            raise self._missing(path, e) from e
        except BaseError as e:
            raise self._failed(path, e) from e

    def write(self, path: str, data: bytes) -> None:
        try:
            obstore.put(self._store, path, _bytes_like(data))
        except (BaseError, FileNotFoundError) as e:
            raise self._failed(path, e) from e

    def write_file(self, path: str, local_file: str) -> None:
        try:
            obstore.put(self._store, path, Path(local_file))
        except (BaseError, FileNotFoundError) as e:
            raise self._failed(path, e) from e

    def create(self, path: str, data: bytes) -> bool:
        """Put-if-absent (``If-None-Match: *``). A PUT whose response was lost is retried by the client
        and refused (412) because it had succeeded: finding exactly its own bytes there, it counts as
        won, so a commit is neither lost nor published twice on a flaky network. AWS answers 409
        (ConditionalRequestConflict) to a conditional PUT racing another on the same key: tried again."""
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                obstore.put(self._store, path, _bytes_like(data), mode="create")
                return True
            except (AlreadyExistsError, PreconditionError, FileExistsError):
                try:
                    return self.read(path) == bytes(data)
                except FileNotFoundError:   # deleted meanwhile (retention): taken all the same
                    return False
            except (BaseError, FileNotFoundError) as e:
                if "ConditionalRequestConflict" in str(e) and attempt < CONFLICT_RETRIES:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise self._failed(path, e) from e
        raise AssertionError("unreachable")

    def _head(self, path: str):
        try:
            return obstore.head(self._store, path)
        except (NotFoundError, FileNotFoundError) as e:
            if "NoSuchBucket" in str(e):
                raise self._failed(path, e) from e
            return None   # (a HEAD answer has no body: a missing bucket shows up at the next GET or LIST)
        except BaseError as e:
            raise self._failed(path, e) from e

    def exists(self, path: str) -> bool:
        return self._head(path) is not None

    def size(self, path: str) -> int:
        meta = self._head(path)
        if meta is None:
            raise FileNotFoundError(2, "No such file", self.location(path))
        return meta["size"]

    def list_info(self, prefix: str = "", *, after: str | None = None) -> list[FileInfo]:
        prefix = prefix.strip("/")
        out = []
        try:
            for chunk in obstore.list(self._store, prefix or None, offset=after, chunk_size=1000):
                out.extend(FileInfo(m["path"], m["size"], int(m["last_modified"].timestamp() * 1000)) for m in chunk)
        except (BaseError, FileNotFoundError) as e:
            raise self._failed(prefix, e) from e
        return sorted(out)

    def delete(self, path: str) -> bool:
        try:
            obstore.delete(self._store, path)
        except (NotFoundError, FileNotFoundError) as e:
            if "NoSuchBucket" in str(e):
                raise self._failed(path, e) from e
        except BaseError as e:
            raise self._failed(path, e) from e
        return True


def _bytes_like(data) -> bytes | memoryview:
    """obstore takes bytes or an unsigned-byte buffer (a pyarrow Buffer's is signed: recast, no copy)."""
    return data if isinstance(data, bytes) else memoryview(data).cast("B")


def s3_options(options: Mapping[str, str]) -> dict[str, str]:
    """The S3 settings: ``options`` first, then AWS's environment variables. Unknown names are refused."""
    unknown = sorted(set(options) - set(S3_OPTIONS))
    if unknown:
        raise ValueError(f"unknown storage option(s) {', '.join(unknown)} (known: {', '.join(S3_OPTIONS)})")
    settings = {}
    for name, env_names in S3_OPTIONS.items():
        value = options.get(name) or next((os.environ[e] for e in env_names if os.environ.get(e)), None)
        if value:
            settings[name] = value
    # a key is a pair: one half alone is a mistake, not "use the instance's credentials"
    for half, other in (("access_key_id", "secret_access_key"), ("secret_access_key", "access_key_id")):
        if half in settings and other not in settings:
            raise ValueError(f"storage option {half} is set but {other} is not (give both, in the options or as "
                             f"{' / '.join(S3_OPTIONS[other])})")
    return settings


def s3_storage(url: str, options: Mapping[str, str]) -> ObjectStorage:
    parsed = urlparse(url)
    if not parsed.netloc:
        raise ValueError(f"no bucket in {url!r} (use s3://bucket/prefix)")
    # only the settings given are passed: obstore takes a missing keyword as "use AWS's default" (the
    # regional endpoint, the instance's credentials) but refuses None for any of them
    settings = s3_options(options)
    allow_http = settings.pop("allow_http", str(settings.get("endpoint", "").startswith("http://"))).lower()
    if allow_http not in ("true", "false"):
        raise ValueError(f"storage option allow_http={allow_http!r} for {url!r}: expected true or false")
    # conditional_put "etag": If-None-Match: * on a create (named, so AWS_CONDITIONAL_PUT cannot turn it off)
    store = S3Store(parsed.netloc, prefix=parsed.path.strip("/") or None, conditional_put="etag",
                    client_options={"allow_http": allow_http == "true", "connect_timeout": CONNECT_TIMEOUT,
                                    "timeout": REQUEST_TIMEOUT},
                    retry_config=RETRY, **settings)
    return ObjectStorage(store, url.rstrip("/"), options)


_memory: dict[str, MemoryStore] = {}
_memory_lock = threading.Lock()


def memory_storage(url: str) -> ObjectStorage:
    """The in-memory store named by ``url`` in this process (created on first use)."""
    url = url.rstrip("/")
    with _memory_lock:
        store = _memory.setdefault(url, MemoryStore())
    return ObjectStorage(store, url)


def _reopen(url: str, options: Mapping[str, str]) -> ObjectStorage:
    """Unpickling (a Spark task): the same S3 location with the same options, or this process's memory
    store of that name."""
    return s3_storage(url, options) if url.lower().startswith("s3://") else memory_storage(url)
