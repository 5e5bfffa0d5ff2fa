"""A network namespace of the fault tests: a separate host on this machine, joined to this namespace by a
veth pair (``outside`` address here, ``inside`` address there, a /30 of 10.0.0.0/8 no interface uses yet).
Cutting it (``cut``: the inside end of the link goes down) isolates whatever runs inside from everything
outside, both ways; ``heal`` brings the link back. ``run_inside`` runs a function on a thread that joined
the namespace (setns(2) changes only the calling thread), so a test's own client can stay on the isolated
side. Names start with ``faults-`` plus a random tag; ``delete`` removes the namespace and both veth ends.
"""
from __future__ import annotations

import ctypes
import os
import random
import shutil
import subprocess
import threading
import uuid
from typing import Callable, TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None if they can."""
    if os.geteuid() != 0:
        return "ip netns needs root (not running as root)"
    if shutil.which("ip") is None:
        return "ip (iproute2) is not installed"
    return None


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


def _used_subnets() -> set[tuple[int, int]]:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, timeout=30).stdout
    used = set()
    for word in out.split():
        if word.startswith("10.") and "/" in word:
            a, b = word.split("/")[0].split(".")[1:3]
            used.add((int(a), int(b)))
    return used


class NetworkNamespace:
    def __init__(self, prefix: str = "faults"):
        tag = uuid.uuid4().hex[:8]
        self.name = f"{prefix}-{tag}"
        self.outer_link, self.inner_link = f"fo{tag}", f"fi{tag}"  # interface names: at most 15 characters
        used = _used_subnets()
        a, b = next((a, b) for a, b in ((random.randint(200, 254), random.randint(0, 255)) for _ in range(1000))
                    if (a, b) not in used)
        self.outside, self.inside = f"10.{a}.{b}.1", f"10.{a}.{b}.2"
        self.created = False

    def create(self) -> "NetworkNamespace":
        _ip("netns", "add", self.name)
        self.created = True
        _ip("link", "add", self.outer_link, "type", "veth", "peer", "name", self.inner_link)
        _ip("link", "set", self.inner_link, "netns", self.name)
        _ip("addr", "add", f"{self.outside}/30", "dev", self.outer_link)
        _ip("link", "set", self.outer_link, "up")
        _ip("netns", "exec", self.name, "ip", "addr", "add", f"{self.inside}/30", "dev", self.inner_link)
        _ip("netns", "exec", self.name, "ip", "link", "set", "lo", "up")
        self.heal()
        return self

    def cut(self) -> None:
        _ip("netns", "exec", self.name, "ip", "link", "set", self.inner_link, "down")

    def heal(self) -> None:
        _ip("netns", "exec", self.name, "ip", "link", "set", self.inner_link, "up")

    def delete(self) -> None:
        """Remove the namespace (its veth end goes with it, and so does the peer); safe to call twice."""
        if self.created:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)
            self.created = False
        subprocess.run(["ip", "link", "del", self.outer_link], capture_output=True, timeout=30)

    def run_inside(self, fn: Callable[[], T], timeout_s: float = 60.0) -> T:
        """``fn()`` on a thread inside the namespace; its result, or its exception raised here."""
        out: dict = {}

        def run() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(f"/var/run/netns/{self.name}", os.O_RDONLY)
                try:
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        err = ctypes.get_errno()
                        raise OSError(err, f"setns into {self.name}: {os.strerror(err)}")
                finally:
                    os.close(fd)
                out["value"] = fn()
            except BaseException as e:  # handed to the caller's thread
                out["error"] = e
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(timeout_s)
        if t.is_alive():
            raise TimeoutError(f"no result from inside {self.name} after {timeout_s:g} s")
        if "error" in out:
            raise out["error"]
        return out["value"]
