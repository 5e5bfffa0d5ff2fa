"""Verifying a table (``tidelake table check``) and the repairs that are safe.

What is checked: the metadata log (every entry from the oldest kept one to the newest is present and
readable, no version missing between them; every checkpoint and the ``_last_checkpoint`` pointer
readable), and every data file the retained versions reference (present, the recorded size, a
readable Parquet footer with the recorded row count, and every page decoded with its CRC-32 checked:
tidelake writes Parquet page checksums, so bytes overwritten in place are found even where they
still decode; a file written without them, by an older tidelake, is checked by decoding alone).

What ``repair`` does, and only this: a damaged or missing checkpoint is rebuilt by replaying the
entries it stands for, when all of them are still there; a damaged or stale ``_last_checkpoint``
pointer is rewritten to name the newest good checkpoint. Everything else (a lost entry, a lost or
damaged data file) cannot be rebuilt from what is left: it is reported with what to do, and left
alone, since dropping the versions after a gap or the rows of a file would silently lose commits.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from tidelake.storage import Storage, open_storage

from .deletion_vectors import read_vectors
from .errors import CorruptDataFile, CorruptLog, VersionExpired
from .files import parquet_source
from .log import LAST_CHECKPOINT, LOG_DIR, MetadataLog
from .metadata import TableMetadata


@dataclass(frozen=True)
class Problem:
    path: str          # the damaged or missing file
    problem: str       # what is wrong, one line
    repair: str        # what --repair does, or what the user can do
    repairable: bool


@dataclass(frozen=True)
class CheckReport:
    path: str
    version: int | None            # the newest version the log reaches (None: unreadable)
    entries: int                   # log entries read
    checkpoints: int
    data_files: int                # data files checked
    problems: tuple[Problem, ...]
    repaired: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"path": self.path, "ok": self.ok, "version": self.version, "entries": self.entries,
                "checkpoints": self.checkpoints, "data_files": self.data_files,
                "problems": [asdict(p) for p in self.problems], "repaired": list(self.repaired)}


def check_table(path: "str | Storage", *, repair: bool = False,
                storage_options: Mapping[str, str] | None = None) -> CheckReport:
    """Verify the table at ``path`` (a local path, s3://..., or a Storage); with ``repair``, perform the
    safe repairs and check again."""
    storage = open_storage(path, storage_options)
    report = _check(storage)
    if not repair or not any(p.repairable for p in report.problems):
        return report
    done = _repair(storage, report)
    after = _check(storage)
    return CheckReport(after.path, after.version, after.entries, after.checkpoints, after.data_files,
                       after.problems, tuple(done))


# ---------------------------------------------------------------- checking

def _check(storage: Storage) -> CheckReport:
    path = storage.url
    log = MetadataLog(storage)
    problems: list[Problem] = []
    names = storage.list(LOG_DIR)
    if not names:
        problems.append(Problem(log.dir, "no metadata log: not a tidelake table", "none", False))
        return CheckReport(path, None, 0, 0, 0, tuple(problems))
    entry_versions = log.entry_versions()
    checkpoint_versions = log.checkpoint_versions()

    # entries: readable, and no version missing from the oldest kept one to the newest
    entries = {}
    for v in entry_versions:
        try:
            entries[v] = log.read_entry(v)
        except CorruptLog as e:
            problems.append(Problem(e.path, e.reason, "restore this file from a backup; it cannot be rebuilt "
                                    "(the commit it records is known only from it)", False))
    if entry_versions:
        present = set(entry_versions)
        for v in range(entry_versions[0], entry_versions[-1]):
            if v not in present:
                problems.append(Problem(log.entry_path(v), f"missing: the log has a gap (versions up to "
                                        f"{entry_versions[-1]} exist)", "restore this file from a backup; "
                                        "the versions after it cannot be read without it", False))

    # checkpoints: readable; one that is damaged can be rebuilt while its entries exist
    good_checkpoints = []
    for v in checkpoint_versions:
        try:
            log.read_checkpoint(v)
            good_checkpoints.append(v)
        except CorruptLog as e:
            fixable = _replayable_to(v, entries, good_checkpoints, log) is not None
            problems.append(Problem(e.path, e.reason, "rebuild it by replaying the log entries" if fixable else
                                    "restore it from a backup (the entries it replaces were expired)", fixable))
    pointer = storage.location(log.pointer_key)
    has_pointer = log.pointer_key in names
    if has_pointer or checkpoint_versions:
        named = _pointer_version(log)
        newest_good = max(good_checkpoints, default=None)
        if named is None and has_pointer:
            problems.append(Problem(pointer, "not a valid checkpoint pointer", "rewrite it to name the newest good "
                                    "checkpoint", newest_good is not None))
        elif named is not None and named not in checkpoint_versions:
            fixable = _replayable_to(named, entries, good_checkpoints, log) is not None
            problems.append(Problem(storage.location(log.checkpoint_key(named)), "missing (named by _last_checkpoint)",
                                    "rebuild it by replaying the log entries" if fixable else
                                    "restore it from a backup", fixable))

    # the state the log reaches, and the data files its retained versions reference
    state = _state(log, entries, good_checkpoints)
    data_files = 0
    if state is not None:
        for fe in state.files.values():
            if not any(fe.live_at(v) for v in state.retained_versions()):
                continue
            data_files += 1
            problem = _check_data_file(storage, fe.file)
            if problem is not None:
                live_now = fe.live_at(state.version)
                problems.append(Problem(storage.location(fe.file.path), problem + (
                    "" if live_now else f" (referenced by versions before {fe.removed_at} only)"),
                    "restore this file from a backup" + ("" if live_now else ", or expire the versions that "
                                                         "reference it (`table expire`)"), False))
        for history in state.deletion_vectors.values():   # (counted with the data files)
            for since, index in history:
                data_files += 1
                try:
                    vectors = read_vectors(storage, index)
                except (VersionExpired, CorruptDataFile) as e:
                    what = "missing" if isinstance(e, VersionExpired) else "damaged"
                    problems.append(Problem(storage.location(index.path), f"{what} (the deletion vectors of bucket "
                                            f"{index.bucket} from version {since})", "restore this file from a backup",
                                            False))
                    continue
                past = [(p, bm.max(), state.files[p].file.rows) for p, bm in vectors.items()
                        if bm and p in state.files and bm.max() >= state.files[p].file.rows]
                for p, row, rows in past[:1]:   # (one line per vectors file)
                    problems.append(Problem(storage.location(index.path), f"damaged (the deletion vectors of bucket "
                                            f"{index.bucket} from version {since}: row {row} of {p}, which has "
                                            f"{rows} rows)", "restore this file from a backup", False))
    return CheckReport(path, state.version if state is not None else None, len(entries), len(checkpoint_versions),
                       data_files, tuple(problems))


def _pointer_version(log: MetadataLog) -> int | None:
    """The version the pointer names; None if it is missing or unreadable."""
    try:
        return log.read_pointer()
    except CorruptLog:
        return None


def _replayable_to(version: int, entries: dict, good_checkpoints: list[int], log: MetadataLog) -> TableMetadata | None:
    """The state at ``version`` rebuilt from the newest good checkpoint below it (or from nothing)
    plus entries, when every entry needed is present and readable; else None."""
    base_v = max((c for c in good_checkpoints if c < version), default=None)
    state = log.read_checkpoint(base_v) if base_v is not None else TableMetadata()
    needed = range(state.version + 1, version + 1)
    if any(entries.get(v) is None for v in needed):
        return None
    return state.apply(*(entries[v] for v in needed))


def _state(log: MetadataLog, entries: dict, good_checkpoints: list[int]) -> TableMetadata | None:
    """The newest state reachable without crossing a damaged or missing entry."""
    base_v = max(good_checkpoints, default=None)
    state = log.read_checkpoint(base_v) if base_v is not None else TableMetadata()
    if base_v is None and 0 not in entries and entries:
        return None  # neither a checkpoint nor the first entry: nothing to replay from
    v = state.version + 1
    todo = []
    while entries.get(v) is not None:
        todo.append(entries[v])
        v += 1
    return state.apply(*todo) if todo or base_v is not None else None


def _check_data_file(storage: Storage, f) -> str | None:
    try:
        size = storage.size(f.path)
    except FileNotFoundError:
        return "missing data file"
    if f.bytes and size != f.bytes:
        return f"size {size} bytes, the log recorded {f.bytes}"
    try:
        source = parquet_source(storage, f.path)
    except FileNotFoundError:
        return "missing data file"
    try:
        meta = pq.read_metadata(source if isinstance(source, str) else pa.BufferReader(source))
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError for a damaged footer
        return f"not readable as Parquet ({type(e).__name__}: {e})"
    if meta.num_rows != f.rows:
        return f"{meta.num_rows} rows, the log recorded {f.rows}"
    return _undecodable_page(source, meta)


def _undecodable_page(source: "str | pa.Buffer", meta: pq.FileMetaData) -> str | None:
    """Every page of every column decoded, one row group at a time, each page's CRC verified where the
    writer stored one (tidelake's data files have them): a page that was overwritten in place is found
    even when its bytes still decode. The first damaged row group, or None."""
    reader = pq.ParquetFile(source if isinstance(source, str) else pa.BufferReader(source), metadata=meta,
                            page_checksum_verification=True, pre_buffer=False)
    for i in range(meta.num_row_groups):
        try:
            reader.read_row_group(i, use_threads=False)
        except Exception as e:  # noqa: BLE001 - pyarrow raises OSError/ArrowInvalid/... for a damaged page
            return f"row group {i} of {meta.num_row_groups} does not decode ({' '.join(str(e).split())})"
    return None


# ---------------------------------------------------------------- repairing

def _repair(storage: Storage, report: CheckReport) -> list[str]:
    log = MetadataLog(storage)
    done: list[str] = []
    entries = {}
    for v in log.entry_versions():
        try:
            entries[v] = log.read_entry(v)
        except CorruptLog:
            pass
    good = []
    for v in log.checkpoint_versions():
        try:
            log.read_checkpoint(v)
            good.append(v)
        except CorruptLog:
            pass
    for p in report.problems:
        if not p.repairable or not p.path.endswith(".checkpoint.json"):
            continue
        version = int(p.path.rsplit("/", 1)[-1].split(".")[0])
        state = _replayable_to(version, entries, good, log)
        if state is None:
            continue
        log.write_checkpoint(state, update_pointer=False)
        good = sorted(set(good) | {version})
        done.append(f"rebuilt {p.path} from log entries {min(entries)}..{version}" if entries else f"rebuilt {p.path}")
    named = _pointer_version(log)
    newest = max(good, default=None)
    # rewrite the pointer only when it is damaged or names an older good checkpoint: one naming a
    # checkpoint that could not be rebuilt stays, so the problem stays visible
    if newest is not None and (named is None or (named in good and named != newest)):
        log.write_pointer(newest)
        done.append(f"pointed {LOG_DIR}/{LAST_CHECKPOINT} at checkpoint {newest}")
    return done
