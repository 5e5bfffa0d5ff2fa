"""One rule for every long-running command (consume, produce, pipeline run/serve, console, broker start,
schema-registry start): SIGTERM is Ctrl-C.

systemd, docker and ``timeout`` stop a process with SIGTERM, a terminal with SIGINT; both must mean the same
clean stop (a consumer closes and leaves its group, a pipeline finishes its batch, a server drains), as Kafka's
tools do on either. ``on_stop_signals`` installs one handler for both: the first signal calls the command's
``stop``, a second its ``abort`` (the second Ctrl-C: stop at once). Both default to ``interrupt``, Python's own
Ctrl-C (KeyboardInterrupt, which also breaks a blocking read), for the commands whose clean stop is an
``except KeyboardInterrupt``; the CLI's error boundary turns a KeyboardInterrupt that escapes into exit 130.
"""
from __future__ import annotations

import logging
import signal
import threading
from typing import Callable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("tidelake.cli")


def interrupt() -> None:
    """What Ctrl-C does to a Python program: KeyboardInterrupt where the main thread is."""
    raise KeyboardInterrupt


def on_stop_signals(stop: Callable[[], None] = interrupt, abort: Callable[[], None] = interrupt,
                    stopping: str | None = None) -> None:
    """SIGTERM and SIGINT: the first calls ``stop`` (logging ``stopping`` if given), any later one ``abort``.
    Install it after anything that installs its own SIGINT handler (a SparkContext does). (Signals reach the main
    thread only: a command run in another thread, as a test may, keeps the process's handlers.)"""
    if threading.current_thread() is not threading.main_thread():
        return
    received: list[int] = []

    def handler(signum: int, _frame) -> None:
        received.append(signum)
        if len(received) > 1:
            abort()
            return
        if stopping is not None:
            log.warning("%s: %s", signal.Signals(signum).name, stopping)
        stop()

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)
