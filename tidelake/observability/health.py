"""Liveness and readiness of one process, as ``/health/live`` and ``/health/ready`` report them.

A check is a function returning ``(ok, detail)``; the process is ready when every readiness check is ok.
Checks run in the HTTP server's thread at each request, so they read state and never block for long."""
from __future__ import annotations

from typing import Callable

Check = Callable[[], tuple[bool, str]]


class Health:
    def __init__(self) -> None:
        self._live: dict[str, Check] = {}
        self._ready: dict[str, Check] = {}

    def add_live(self, name: str, check: Check) -> None:
        self._live[name] = check

    def add_ready(self, name: str, check: Check) -> None:
        self._ready[name] = check

    def live(self) -> tuple[bool, dict[str, dict]]:
        return _run(self._live)

    def ready(self) -> tuple[bool, dict[str, dict]]:
        return _run(self._ready)


def _run(checks: dict[str, Check]) -> tuple[bool, dict[str, dict]]:
    results = {}
    for name, check in list(checks.items()):
        try:
            ok, detail = check()
        except Exception as e:  # a failing check is a "no", with the reason
            ok, detail = False, f"check failed: {e!r}"
        results[name] = {"ok": bool(ok), "detail": detail}
    return all(r["ok"] for r in results.values()), results


class Flag:
    """A readiness condition set once by the process (e.g. "logs loaded"): ``check`` reports it."""

    def __init__(self, waiting: str, done: str):
        self.ok = False
        self._waiting, self._done = waiting, done

    def set(self) -> None:
        self.ok = True

    def clear(self) -> None:
        self.ok = False

    def check(self) -> tuple[bool, str]:
        return self.ok, self._done if self.ok else self._waiting
