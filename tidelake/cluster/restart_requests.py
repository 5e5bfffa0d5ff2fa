"""Restart requests to a running ``tidelake cluster start``: ``tidelake cluster restart-broker ID`` leaves a file
``<root>/restart-broker-<id>.request`` (its text: ``stop`` or ``kill``), and the ``cluster start`` that owns the
brokers takes it on its next tick, stops the broker (SIGTERM, or SIGKILL: a crash) and starts it again with the
same command line, so the new process is its child like the others and Ctrl-C still stops everything.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PREFIX = "restart-broker-"
SUFFIX = ".request"


@dataclass(frozen=True)
class RestartRequest:
    broker_id: int
    kill: bool  # SIGKILL (as a crash) rather than SIGTERM (a controlled shutdown)


def request_restart(root: Path, request: RestartRequest) -> Path:
    """Write the request atomically (the owner never reads half of it); returns its path."""
    path = root / f"{PREFIX}{request.broker_id}{SUFFIX}"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("kill" if request.kill else "stop")
    os.replace(tmp, path)
    return path


def take_restart_requests(root: Path) -> list[RestartRequest]:
    """The pending requests under ``root``, removed as they are read (oldest broker id first)."""
    out = []
    for path in sorted(root.glob(f"{PREFIX}*{SUFFIX}")):
        broker_id = path.name.removeprefix(PREFIX).removesuffix(SUFFIX)
        try:
            text = path.read_text().strip()
            path.unlink()
        except FileNotFoundError:
            continue
        if broker_id.isdigit():
            out.append(RestartRequest(int(broker_id), text == "kill"))
    return out
