"""Deletion vectors: the rows of a bucket's data files that newer commits superseded, by position (table
property ``deletion-vectors.enabled``; Apache Paimon's deletion-vectors mode, Delta's and Iceberg v3's
deletion vectors), so a snapshot read filters each file by position and concatenates, with no merge by key.

A bucket's vectors are one file, ``data/bucket-NNNNN/dv-<uuid>.arrow``, written by each data commit that
adds files to the bucket (dv_commit.py): an Arrow IPC file of rows ``file`` (a data file's path) and
``positions`` (a portable serialized roaring bitmap of its superseded rows, in the file's stored order). It
holds every vector of the bucket at that version (the previous file's and the commit's), so a read opens
one per bucket. The log names it (``SetDeletionVectors``) with the files it covers; a delete row itself is
never marked (readers drop delete rows as they always do).
"""
from __future__ import annotations

import uuid
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from tidelake.storage import Storage, StorageError

from .errors import CorruptDataFile, VersionExpired
from .metadata import DeletionVectorIndex

_SCHEMA = pa.schema([pa.field("file", pa.string(), nullable=False), pa.field("positions", pa.binary(), nullable=False)])


def write_vectors(storage: Storage, bucket: int, covers: Sequence[str],
                  vectors: Mapping[str, BitMap]) -> DeletionVectorIndex:
    """Write a bucket's vectors (only the non-empty ones are stored; ``covers`` names every file they are
    exact for) and return the index the log records."""
    marked = sorted(p for p, bm in vectors.items() if bm)
    table = pa.table({"file": pa.array(marked, pa.string()),
                      "positions": pa.array([vectors[p].serialize() for p in marked], pa.binary())}, schema=_SCHEMA)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, _SCHEMA) as w:
        w.write_table(table)
    data = sink.getvalue().to_pybytes()
    path = f"data/bucket-{bucket:05d}/dv-{uuid.uuid4().hex}.arrow"
    storage.write(path, data)
    return DeletionVectorIndex(path, bucket, tuple(covers), sum(len(vectors[p]) for p in marked), len(data))


def read_vectors(storage: Storage, index: DeletionVectorIndex) -> dict[str, BitMap]:
    """A bucket's vectors by data file path (a file without superseded rows is absent)."""
    try:
        data = storage.read(index.path)
    except FileNotFoundError:
        raise VersionExpired(f"deletion vectors file {index.path} is missing: removed by retention cleanup (read a "
                             f"newer version) or lost (`tidelake table check` tells which)") from None
    except StorageError:
        raise
    try:
        table = pa.ipc.open_file(pa.py_buffer(data)).read_all()
        return {p: BitMap.deserialize(b) for p, b in zip(table.column("file").to_pylist(),
                                                         table.column("positions").to_pylist())}
    except (pa.ArrowInvalid, ValueError, KeyError) as e:
        raise CorruptDataFile(index.path, str(e)) from e


def positions(vector: BitMap) -> np.ndarray:
    """A vector's positions, ascending, as int64."""
    return np.frombuffer(vector.to_array(), dtype=np.uint32).astype(np.int64)


def kept_positions(vector: BitMap, rows: int) -> np.ndarray:
    """The positions of a file of ``rows`` rows that ``vector`` does not mark, ascending, as uint32: the
    bitmap's complement, taken by the bitmap library (a quarter of the CPU of a mask set and scanned in
    numpy)."""
    return np.frombuffer(vector.flip(0, rows).to_array(), dtype=np.uint32)
