"""What goes wrong turning Kafka record values into table changes, for every value format.

``BadChangeEvent`` is the record's fault (it is a bad record: ``on_error`` fails, skips or dead-letters it);
``RegistryUnavailable`` is the schema registry's (the batch fails whole and is read again after a restart).
"""
from __future__ import annotations


class BadChangeEvent(ValueError):
    """A record value that is not a change event of the configured format; ``partition`` and ``offset``
    name the record once it has been located (``changes.parse_changes_located``)."""

    def __init__(self, reason: str, *, partition: int | None = None, offset: int | None = None):
        self.reason, self.partition, self.offset = reason, partition, offset
        where = f"partition {partition} offset {offset}: " if partition is not None else ""
        super().__init__(where + reason)


class RegistryUnavailable(ConnectionError):
    """The schema registry cannot answer (down, unreachable, refusing the pipeline's credentials): like any
    server that cannot be reached, a ConnectionError, which the CLI reports as its one line."""
