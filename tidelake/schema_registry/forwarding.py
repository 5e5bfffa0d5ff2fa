"""``Forwarder``: a write that reaches a registry that is not the primary goes to the primary (Confluent's
followers forward the same way), with its method, path, query, body and ``Authorization`` header.

A forwarded request carries a header; a process that gets one while not primary itself answers 50004 instead of
forwarding again (two processes with stale views must not bounce a request between them).
"""
from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Protocol

from tidelake.schema_registry import errors

FORWARDED_HEADER = "X-Tidelake-Registry-Forwarded"


class PrimaryRole(Protocol):
    def is_primary(self) -> bool:
        """Whether this process writes ``_schemas`` now."""

    def primary_url(self) -> str | None:
        """The REST address of the primary (None while none is elected)."""


@dataclass(frozen=True)
class ForwardedAnswer:
    status: int
    body: bytes


class Forwarder:
    def __init__(self, role: PrimaryRole, timeout_s: float, ssl_context: ssl.SSLContext | None = None):
        self._role = role
        self._timeout_s = timeout_s
        self._ssl_context = ssl_context

    def is_primary(self) -> bool:
        return self._role.is_primary()

    def forward(self, method: str, path: str, query: str, body: bytes, authorization: str | None,
                already_forwarded: bool) -> ForwardedAnswer:
        url = self._role.primary_url()
        if url is None or already_forwarded:
            raise errors.unknown_leader("Leader not known." if url is None else
                                        "A forwarded write reached a registry that is not the primary.")
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json", FORWARDED_HEADER: "1"}
        if authorization:
            headers["Authorization"] = authorization
        request = urllib.request.Request(f"{url.rstrip('/')}{path}" + (f"?{query}" if query else ""),
                                         data=body or None, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s, context=self._ssl_context) as answer:
                return ForwardedAnswer(answer.status, answer.read())
        except urllib.error.HTTPError as e:
            return ForwardedAnswer(e.code, e.read())
        except urllib.error.URLError as e:
            raise errors.forwarding_failed(
                f"Error while forwarding the request to the leader {url}: {e.reason}") from None
        except OSError as e:
            raise errors.forwarding_failed(
                f"Error while forwarding the request to the leader {url}: {e}") from None
