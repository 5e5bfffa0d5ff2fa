"""Kafka's ``replication-offset-checkpoint``: the high watermark of every replicated partition of a data
directory, so a restarted broker does not take its log end for its high watermark (which would let
consumers read records the ISR never had, should it become leader)::

    0              <- version
    2              <- number of entries
    orders 0 1500  <- topic partition high-watermark
    orders 1 1432

Written rename-atomically and fsynced, every ``replica.high.watermark.checkpoint.interval.ms`` and at stop.
"""
from __future__ import annotations

import os
from pathlib import Path

CHECKPOINT_FILE = "replication-offset-checkpoint"


def read_high_watermarks(data_dir: Path) -> dict[tuple[str, int], int]:
    """The checkpointed high watermarks; empty if the file is missing or unreadable."""
    try:
        lines = (Path(data_dir) / CHECKPOINT_FILE).read_text().split("\n")
        count = int(lines[1])
        out = {}
        for line in lines[2:2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        return out if int(lines[0]) == 0 and len(out) == count else {}
    except (FileNotFoundError, ValueError, IndexError):
        return {}


def write_high_watermarks(data_dir: Path, hws: dict[tuple[str, int], int]) -> None:
    path = Path(data_dir) / CHECKPOINT_FILE
    tmp = path.with_name(path.name + ".tmp")
    text = "0\n%d\n%s" % (len(hws), "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(hws.items())))
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
