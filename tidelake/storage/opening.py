"""Opening a storage by URL: the one place that knows every implementation (``open_storage``), so the
interface (``storage.py``) imports none of them."""
from __future__ import annotations

import os
from typing import Mapping
from urllib.parse import urlparse

from .local import LocalStorage
from .objects import memory_storage, s3_storage
from .storage import Storage


def is_local(url: str) -> bool:
    """A bare path or file:// (not an object store, not memory)."""
    return _scheme(url) in ("", "file")


def _scheme(url: str) -> str:
    """'s3' of 's3://...', '' of a path (not urlparse: a path may hold anything, e.g. brackets)."""
    head, sep, _ = url.partition("://")
    return head.lower() if sep and head.isalnum() else ""


def open_storage(url: "str | Storage", options: Mapping[str, str] | None = None) -> Storage:
    """The storage at ``url``:

    - a bare path or ``file://``: files on a local disk (``LocalStorage``); option ``fsync`` (default
      true; false keeps written files in the page cache only, as object_store's local store does by
      default: a power loss can then lose committed versions);
    - ``s3://bucket[/prefix]``: S3 or an S3-compatible server; ``options`` (endpoint, region,
      access_key_id, secret_access_key, session_token, allow_http) win over AWS's environment
      variables (AWS_ENDPOINT_URL, AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, ...);
    - ``memory://name``: in this process's memory (tests); the same name is the same store.

    A Storage passed in is returned as is."""
    if isinstance(url, Storage):
        return url
    options = {str(k): str(v) for k, v in (options or {}).items()}
    scheme = _scheme(url)
    if scheme in ("", "file"):
        fsync = options.pop("fsync", "true").lower()
        if options:
            raise ValueError(f"storage options {sorted(options)} given for the local path {url!r} (a local disk "
                             "takes only fsync; the others are for s3://)")
        if fsync not in ("true", "false"):
            raise ValueError(f"storage option fsync={fsync!r} for {url!r}: expected true or false")
        return LocalStorage(os.path.abspath(urlparse(url).path if scheme == "file" else url), fsync=fsync == "true")
    if scheme == "s3":
        return s3_storage(url, options)
    if scheme == "memory":
        return memory_storage(url)
    raise ValueError(f"unsupported storage URL {url!r} (use a path, file://, s3:// or memory://)")
