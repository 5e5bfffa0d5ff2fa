"""How a failed Spark task of a pipeline batch reaches the user: the worker's exception cut out of Spark's
PythonException (which carries the worker's Python traceback and the JVM's stacks) as one line."""
from __future__ import annotations


class PoisonRecord(ValueError):
    """A record the pipeline cannot turn into a change, with on_error: fail: topic, partition, offset, why."""


class TaskFailed(RuntimeError):
    """A Spark task of a batch failed: one line, what the batch read and the worker's exception (type: message),
    without Spark's Python and Java stacks (the cause keeps them)."""


def worker_exception(exc: BaseException) -> str | None:
    """``Type: message`` of the last exception in the Python worker traceback a task failure carries, else None."""
    text = str(exc)
    at = text.rfind("Traceback (most recent call last):")
    if at < 0:
        return None
    for line in text[at:].splitlines()[1:]:
        if line and not line[0].isspace():  # the first unindented line after the frames
            kind, sep, message = line.partition(": ")
            return f"{kind.rsplit('.', 1)[-1]}{sep}{message}".strip()
    return None


def task_error(exc: BaseException, kind: type[Exception]) -> str | None:
    """The message of a ``kind`` exception raised in a Spark task (its last line names it), else None: for a
    BadChangeEvent 'partition P offset O: reason'."""
    text = str(exc)
    marker = f"{kind.__name__}: "
    if marker not in text:
        return None
    line = text[text.rindex(marker) + len(marker):].splitlines()[0].strip()
    return line or None
