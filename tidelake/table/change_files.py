"""Change files: the change data feed with before-images written by the commit that makes the changes
(table property ``changelog.producer=lookup``; Paimon's lookup changelog producer, Delta's
``_change_data`` files), so ``Table.changes(before_images=True)`` reads them instead of looking the
images up at read time.

One change file per L0 delta a data commit adds, beside it (``data/bucket-NNNNN/change-<uuid>.parquet``),
named by the delta's ``DataFile.changes``: its rows are the delta's changes as image rows (every table
column of the delta's schema, then ``_op``: int8, the index into ``change_feed.CHANGE_TYPES``), in key order,
a preimage before its postimage. A separate file rather than extra columns of the delta: merge on read,
clustering and compaction never read it, and the change feed reads only it (no delta) for such a version.
It lives and dies with its delta: retention deletes both once no retained version reads the delta.

The images are looked up (``KeyLookup``: only the buckets and rows of the changed keys) in the state the
commit is published on, version N-1 for version N, not the version the writer read: a blind upsert
committed after other upserts still records the rows it replaced. The committer calls :meth:`write`
for every attempt: an attempt that loses the race for its version number discards its change files, and
the next attempt looks the images up again in the newer state (never recording stale images). The
files a lookup decodes stay decoded for the next commits (``changelog.lookup.cache.bytes``; the big
older files of a bucket then cost a commit nothing until compaction or clustering replaces them).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import pyarrow as pa

from tidelake.storage import Storage

from .change_feed import build_images
from .files import OP, DataFile, remove_files, write_parquet
from .key_lookup import DecodedFiles, KeyLookup
from .metadata import TableMetadata
from .properties import CHANGELOG_LOOKUP_CACHE_BYTES, CHANGELOG_PRODUCER
from .reader import MergeOnReadReader, dictionary_strings
from .scan import ScanPlanner

class ChangeFileWriter:
    """Writes the change files of one commit's L0 deltas (see the module's doc)."""

    def __init__(self, storage: Storage, reader: MergeOnReadReader):
        self.storage = storage
        self.reader = reader
        # the older files this writer's lookups decoded, for its next commits (the big ones change only
        # at a compaction or clustering)
        self.decoded = DecodedFiles(CHANGELOG_LOOKUP_CACHE_BYTES.parse(CHANGELOG_LOOKUP_CACHE_BYTES.default))

    @staticmethod
    def wanted(md: TableMetadata) -> bool:
        """Whether commits on ``md`` write change files (the table property)."""
        return md.setting(CHANGELOG_PRODUCER) == "lookup"

    def write(self, md: TableMetadata, adds: Sequence[DataFile]) -> list[DataFile]:
        """``adds`` with each L0 delta of version ``md.version + 1`` naming its change file, written with
        the images of the rows live at ``md.version``. Nothing is left behind if this fails."""
        version = md.version + 1
        mine = [i for i, f in enumerate(adds) if f.kind == "delta" and f.level == 0 and f.min_version == version]
        if not mine:
            return list(adds)
        # strings stay encoded as stored through to the file written (not the key: it is sorted and joined)
        schema = dictionary_strings(md.schema, md.primary_key)
        columns = schema.names
        pk = list(md.primary_key)
        by_bucket: dict[int, list[int]] = {}
        for i in mine:   # (in the order they were added: a key in two of them changed in that order)
            by_bucket.setdefault(adds[i].bucket, []).append(i)
        plans = {p.bucket: p for p in ScanPlanner(md).snapshot(md.version, buckets=set(by_bucket))}
        self.decoded.resize(md.setting(CHANGELOG_LOOKUP_CACHE_BYTES))
        lookup = KeyLookup(self.storage, md, self.reader, self.decoded)
        written: list[DataFile] = []

        def one_bucket(bucket: int) -> list[DataFile]:
            """The bucket's change files, one per delta (each in its delta's key order, as its images are)."""
            mine_here = by_bucket[bucket]
            deltas = [self.reader.read_file(adds[i], columns, schema) for i in mine_here]
            raw = pa.concat_tables(deltas)
            images = build_images(raw, lambda keys: lookup.bucket_rows(plans.get(bucket), keys, columns, schema),
                                  pk, columns, distinct_keys=len(mine_here) == 1)
            rows = images.rows.append_column(pa.field(OP, pa.int8()), pa.array(images.codes))
            delta_of_change = np.repeat(np.arange(len(mine_here)), [t.num_rows for t in deltas])[images.changes]
            out = []
            for j in range(len(mine_here)):
                part = rows if len(mine_here) == 1 else rows.filter(pa.array(delta_of_change == j))
                f = write_parquet(self.storage, part, kind="change", bucket=bucket, level=0, primary_key=pk,
                                  min_version=version, max_version=version)
                written.append(f)
                out.append(f)
            return out
        try:
            # the buckets in the reader's threads: each reads, looks up, builds and writes on its own
            changed = self.reader.map_files(one_bucket, sorted(by_bucket), sum(adds[i].rows for i in mine))
        except BaseException:
            remove_files(self.storage, [f.path for f in written])
            raise
        out = list(adds)
        for bucket, files in zip(sorted(by_bucket), changed):
            for i, c in zip(by_bucket[bucket], files):
                out[i] = replace(out[i], changes=c.path)
        return out

    def discard(self, adds: Sequence[DataFile]) -> None:
        """Delete the change files :meth:`write` wrote for ``adds`` (an attempt that was not published)."""
        remove_files(self.storage, [f.changes for f in adds if f.changes])

