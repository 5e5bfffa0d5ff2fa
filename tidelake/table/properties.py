"""Table properties: the one home of each property's name, type, default, allowed values and meaning
(as pyiceberg's ``TableProperties`` / ``property_as_int``).

Values are strings in the log, as in MaxCompute; code reads them typed through a ``TableProperty``
(``COMPACTION_COMMIT_NUM.of(properties)`` or ``TableMetadata.setting(COMPACTION_COMMIT_NUM)``), never as
``properties.get(name, "default")``. ``validated`` checks what ``create`` and ``set_properties`` are given
before anything is committed: a value of the wrong type, out of range or not one of the allowed words is
refused, and so is a name that is none of these properties unless it is in the users' namespace ``user.``
(``user.owner=ops``: kept as given, read by nobody in tidelake).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Generic, Mapping, TypeVar

from .errors import TableError

T = TypeVar("T")

#: names under this prefix are the users' own (free text, never read by tidelake)
USER_PREFIX = "user."


class InvalidProperty(TableError):
    """A table property name or value that is not understood (``name``: the property)."""

    def __init__(self, name: str, reason: str):
        self.name = name
        super().__init__(f"table property {name}: {reason}")


@dataclass(frozen=True)
class TableProperty(Generic[T]):
    """One property: its name, default (a string, as stored) and meaning. Subclasses parse a value."""
    name: str
    default: str
    doc: str

    def parse(self, text: str) -> T:
        """The typed value of ``text``; InvalidProperty naming this property if it is not one."""
        raise NotImplementedError

    def of(self, properties: Mapping[str, str]) -> T:
        """This property's typed value in ``properties`` (its default when absent)."""
        return self.parse(properties.get(self.name, self.default))

    def expected(self) -> str:
        """What a value must be, for messages and documentation."""
        raise NotImplementedError

    def _refuse(self, text: str) -> InvalidProperty:
        return InvalidProperty(self.name, f"{text!r} is not {self.expected()}")


@dataclass(frozen=True)
class BoolProperty(TableProperty[bool]):
    def parse(self, text: str) -> bool:
        word = text.strip().lower()
        if word not in ("true", "false"):
            raise self._refuse(text)
        return word == "true"

    def expected(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class IntProperty(TableProperty[int]):
    minimum: int = 0

    def parse(self, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise self._refuse(text) from None
        if value < self.minimum:
            raise self._refuse(text)
        return value

    def expected(self) -> str:
        return f"an integer >= {self.minimum}"


@dataclass(frozen=True)
class HoursProperty(TableProperty[float]):
    """A duration in hours (a decimal number >= 0, as MaxCompute's acid.data.retain.hours)."""

    def parse(self, text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise self._refuse(text) from None
        if not 0 <= value < float("inf"):   # (also refuses nan)
            raise self._refuse(text)
        return value

    def expected(self) -> str:
        return "a number of hours >= 0"


@dataclass(frozen=True)
class ChoiceProperty(TableProperty[str]):
    choices: tuple[str, ...] = ()

    def parse(self, text: str) -> str:
        word = text.strip().lower()
        if word not in self.choices:
            raise self._refuse(text)
        return word

    def expected(self) -> str:
        return "one of " + ", ".join(self.choices)


@dataclass(frozen=True)
class NameProperty(TableProperty[str]):
    """A column name, or empty for none (which column it must be is checked against the schema by its reader)."""

    def parse(self, text: str) -> str:
        name = text.strip()
        if name != text or any(c in name for c in ",\n"):
            raise self._refuse(text)
        return name

    def expected(self) -> str:
        return "one column name (or empty)"


@dataclass(frozen=True)
class NamesProperty(TableProperty[tuple[str, ...]]):
    """A comma-separated list of column names (empty: none)."""

    def parse(self, text: str) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
        if any("\n" in n for n in names):
            raise self._refuse(text)
        return names

    def expected(self) -> str:
        return "a comma-separated list of column names (or empty)"


@dataclass(frozen=True)
class ChoicesProperty(TableProperty[tuple[str, ...]]):
    """A comma-separated set of words out of ``choices`` (empty: none)."""
    choices: tuple[str, ...] = ()

    def parse(self, text: str) -> tuple[str, ...]:
        words = tuple(dict.fromkeys(w.strip().lower() for w in text.split(",") if w.strip()))
        if any(w not in self.choices for w in words):
            raise self._refuse(text)
        return words

    def expected(self) -> str:
        return "a comma-separated list of " + ", ".join(self.choices) + " (or empty)"


TRANSACTIONAL = ChoiceProperty("transactional", "true", "only transactional tables exist", ("true",))
BUCKET_NUM = IntProperty("write.bucket.num", "16", "buckets: hash(PK) mod this; fixed at creation", 1)
RETAIN_HOURS = HoursProperty("acid.data.retain.hours", "24",
                             "time travel / incremental horizon; older history is cleaned")
RETENTION_AUTO = BoolProperty("retention.auto", "true", "clean expired history automatically after commits")
RETENTION_CHECK_COMMIT_NUM = IntProperty(
    "retention.check.commit.num", "10", "clean once this many versions passed the horizon (cleanup lists the data)", 1)
CLUSTERING_AUTO = BoolProperty("clustering.auto", "true", "run clustering automatically after data commits")
CLUSTERING_L0_NUM = IntProperty("clustering.l0.num", "8",
                                "merge a bucket's L0 delta files into L1 when this many exist", 2)
CLUSTERING_L1_NUM = IntProperty("clustering.l1.num", "8", "merge L1 files into L2 when this many exist", 2)
CLUSTERING_KEEP_EVERY_ROW = BoolProperty(
    "clustering.keep.every.row", "true", "clustering keeps every row of the files it merges (every intermediate "
    "state); false: only each key's newest row (Paimon's sorted-run merge), so reads between compactions decode fewer "
    "rows")
CLUSTERING_MAX_FILE_BYTES = IntProperty("clustering.max.file.bytes", str(64 << 20),
                                        "files at least this big are never clustered", 1)
CLUSTERING_MAX_TIME_SPAN_HOURS = HoursProperty("clustering.max.time.span.hours", "6",
                                               "never cluster files or groups spanning longer than this")
COMPACTION_DELTA_NUM = IntProperty("compaction.delta.num", "0",
                                   "auto-compact a bucket once it has this many live deltas (0: off)", 0)
COMPACTION_COMMIT_NUM = IntProperty("compaction.commit.num", "0",
                                    "auto-compact all buckets every this many data commits (0: off)", 0)
COMPACTION_PARALLELISM = IntProperty("compaction.parallelism", "4", "buckets compacted in parallel (threads)", 1)
CHECKPOINT_INTERVAL = IntProperty("checkpoint.interval", "10",
                                  "write a metadata checkpoint every this many versions", 1)
MAINTENANCE_MODE = ChoiceProperty("maintenance.mode", "background",
                                  "automatic maintenance: a background thread, or inline in the commit",
                                  ("background", "inline"))
CHANGELOG_PRODUCER = ChoiceProperty("changelog.producer", "none",
                                    "who produces the change feed's before-images: none (looked up when read) or "
                                    "lookup (looked up by the commit and stored in change files)", ("none", "lookup"))
CHANGELOG_LOOKUP_CACHE_BYTES = IntProperty("changelog.lookup.cache.bytes", str(256 << 20),
                                           "memory a writer keeps older files decoded in for its lookups", 0)
MERGE_ENGINE = ChoiceProperty("merge-engine", "deduplicate",
                              "how the rows written for one key combine (merge_engine.py); fixed at creation",
                              ("deduplicate", "partial-update", "aggregation", "first-row"))
SEQUENCE_FIELD = NameProperty("sequence.field", "", "a column ordering each key's rows: a row whose value is "
                              "smaller than the live row's is dropped (empty: arrival order)")
AGGREGATION_REMOVE_RECORD_ON_DELETE = BoolProperty(
    "aggregation.remove-record-on-delete", "false", "merge-engine=aggregation: a delete removes the key's row "
    "(false: a delete is refused)")
#: ``fields.<column>.aggregate-function`` (merge-engine=aggregation): one property per column, this template
FIELD_AGGREGATE_PREFIX, FIELD_AGGREGATE_SUFFIX = "fields.", ".aggregate-function"
AGGREGATE_FUNCTION = ChoiceProperty(
    FIELD_AGGREGATE_PREFIX + "<column>" + FIELD_AGGREGATE_SUFFIX, "last_non_null_value",
    "merge-engine=aggregation: how a column's values combine", (
        "sum", "min", "max", "count", "last_value", "last_non_null_value", "first_value", "bool_and", "bool_or",
        "listagg"))
DELETION_VECTORS_ENABLED = BoolProperty(
    "deletion-vectors.enabled", "false", "data commits record the rows they supersede in older files by position "
    "(deletion_vectors.py), so reads between compactions filter files instead of merging them by key")
HIDDEN_COLUMNS = NamesProperty(
    "columns.hidden", "", "columns every reader leaves out unless it asks for them (include_hidden): an aggregate "
    "sink's state, read only by the pipeline that maintains it")
VIEW_FORMATS = ChoicesProperty("view.formats", "", "publish the read-optimized view after each compaction in these "
                               "open formats", ("delta", "iceberg"))

#: every property tidelake reads, by name
TABLE_PROPERTIES: dict[str, TableProperty] = {p.name: p for p in (
    TRANSACTIONAL, BUCKET_NUM, RETAIN_HOURS, RETENTION_AUTO, RETENTION_CHECK_COMMIT_NUM, CLUSTERING_AUTO,
    CLUSTERING_L0_NUM, CLUSTERING_L1_NUM, CLUSTERING_KEEP_EVERY_ROW, CLUSTERING_MAX_FILE_BYTES,
    CLUSTERING_MAX_TIME_SPAN_HOURS, COMPACTION_DELTA_NUM, COMPACTION_COMMIT_NUM, COMPACTION_PARALLELISM,
    CHECKPOINT_INTERVAL, MAINTENANCE_MODE, CHANGELOG_PRODUCER, CHANGELOG_LOOKUP_CACHE_BYTES, VIEW_FORMATS,
    MERGE_ENGINE, SEQUENCE_FIELD, AGGREGATION_REMOVE_RECORD_ON_DELETE, DELETION_VECTORS_ENABLED, HIDDEN_COLUMNS)}

#: what a new table starts with (every property but view.formats, whose default is "none")
CREATION_DEFAULTS: dict[str, str] = {p.name: p.default for p in TABLE_PROPERTIES.values() if p.default}


def aggregated_column(name: str) -> str | None:
    """The column a ``fields.<column>.aggregate-function`` property names (None: not such a property)."""
    if name.startswith(FIELD_AGGREGATE_PREFIX) and name.endswith(FIELD_AGGREGATE_SUFFIX):
        column = name[len(FIELD_AGGREGATE_PREFIX):-len(FIELD_AGGREGATE_SUFFIX)]
        return column or None
    return None


def aggregate_function(column: str) -> ChoiceProperty:
    """The ``fields.<column>.aggregate-function`` property of ``column``."""
    return replace(AGGREGATE_FUNCTION, name=FIELD_AGGREGATE_PREFIX + column + FIELD_AGGREGATE_SUFFIX)


def engine_property(name: str) -> bool:
    """Whether ``name`` is one of the merge engine's properties (fixed at creation, as the engine is)."""
    return name in (MERGE_ENGINE.name, SEQUENCE_FIELD.name, AGGREGATION_REMOVE_RECORD_ON_DELETE.name) or \
        aggregated_column(name) is not None


def validated(properties: Mapping[str, object]) -> dict[str, str]:
    """``properties`` as strings, each checked: a known property's value must parse, any other name must
    start with ``user.``. The first problem is an InvalidProperty; nothing is changed by it."""
    out = {}
    for name, value in properties.items():
        name, text = str(name), str(value)
        prop = TABLE_PROPERTIES.get(name)
        if prop is not None:
            prop.parse(text)
        elif aggregated_column(name) is not None:
            aggregate_function(aggregated_column(name)).parse(text)
        elif not name.startswith(USER_PREFIX) or name == USER_PREFIX:
            raise InvalidProperty(name, f"unknown (known: {', '.join(TABLE_PROPERTIES)}; a property of your own "
                                        f"goes under {USER_PREFIX}, e.g. {USER_PREFIX}{name})")
        out[name] = text
    return out
