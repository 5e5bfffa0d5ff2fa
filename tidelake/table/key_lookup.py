"""Point lookups of many keys in one version of a table: the live row of each key, reading only the
buckets the keys hash to (the change feed's before-images, change_feed.py)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from tidelake.storage import Storage

from .files import bucket_ids
from .metadata import TableMetadata
from .reader import MergeOnReadReader
from .scan import BucketPlan, ScanPlanner


class KeyLookup:
    """Looks keys up in the versions of one metadata snapshot."""

    def __init__(self, storage: Storage, metadata: TableMetadata, reader: MergeOnReadReader):
        self.storage = storage
        self.md = metadata
        self.reader = reader
        self.primary_key = list(metadata.primary_key)

    def rows(self, version: int, keys: pa.Table, columns: Sequence[str], schema: pa.Schema) -> pa.Table:
        """The rows live at ``version`` whose key is in ``keys`` (distinct keys), as ``columns`` of ``schema``
        (which must include the key); keys not live then are absent. In no particular order."""
        out_schema = pa.schema([schema.field(c) for c in columns])
        if keys.num_rows == 0 or version <= 0:
            return out_schema.empty_table()
        pk = self.primary_key
        ids = bucket_ids(keys.select(pk), pk, self.md.bucket_num)
        wanted = set(np.unique(ids).tolist())
        plans = ScanPlanner(self.md).snapshot(version, buckets=wanted)
        by_bucket = {b: keys.filter(pa.array(ids == b)) for b in wanted}
        parts = self.reader._map(lambda p: self._bucket(p, by_bucket[p.bucket], list(columns), schema), plans,
                                 sum(fe.file.rows for p in plans for fe in p.files))
        return pa.concat_tables(parts).cast(out_schema) if parts else out_schema.empty_table()

    def _bucket(self, plan: BucketPlan, keys: pa.Table, columns: list[str], schema: pa.Schema) -> pa.Table:
        live = self.reader.merge_bucket(plan, columns, schema)
        return live.join(keys.select(self.primary_key), keys=self.primary_key, join_type="left semi")
