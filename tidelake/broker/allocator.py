"""Process-wide allocator settings for a broker process.

Produce requests arrive as frames of up to a few MB, assembled in one fresh buffer each, and socket
reads hand over chunks of a few hundred KB. With glibc's defaults, buffers that size are served by
mmap (or from the heap top that free() then trims back to the kernel), so every request pays page
faults on memory it touches once: measured at 1 KB and 10 KB messages, that cost a third of the
broker's produce throughput and moved with unrelated allocations elsewhere in the process. Raising
the mmap and trim thresholds keeps freed frame memory in the heap for the next request, which is
what the JVM's heap gives Kafka. A process that set MALLOC_* variables itself keeps its own choice.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's own ceiling for its dynamic threshold
TRIM_THRESHOLD_BYTES = 128 * 1024 * 1024


def keep_large_buffers() -> bool:
    """Apply the thresholds (glibc only); True when they were set."""
    if any(k.startswith("MALLOC_") for k in os.environ):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): their allocators differ anyway
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD,
                                                                                   TRIM_THRESHOLD_BYTES))
