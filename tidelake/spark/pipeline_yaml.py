"""A pipeline YAML file checked key by key before anything starts, with ``file:line`` in every error.

The allowed keys and their types are the fields of the config dataclasses (pipeline_config.py), so the two
cannot drift apart; line numbers come from PyYAML's composed nodes. An error reads
``orders.yaml:12: sink.buckets: expected an integer >= 1, got 'four'`` or
``orders.yaml:3: unknown key 'sourse' (did you mean 'source'?)``.
"""
from __future__ import annotations

import difflib
import os
import types
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import yaml

from tidelake.spark.pipeline_config import (MetricsConfig, PipelineConfig, PipelineConfigError, SinkConfig,
                                            SourceConfig, SparkConfig, StateConfig, TriggerConfig)
from tidelake.spark.registered_schemas import SchemaRegistryConfig

Location = tuple[str, ...]  # the keys leading to a value: ("sink", "buckets")

SECTIONS = {"source": SourceConfig, "sink": SinkConfig, "metrics": MetricsConfig,
            "schema_registry": SchemaRegistryConfig, "trigger": TriggerConfig, "spark": SparkConfig,
            "state": StateConfig}
REQUIRED_SECTIONS = ("source", "sink")
# Lower bounds of numeric fields (everything else numeric is unbounded).
MINIMUM = {("source", "max_rate_per_partition"): 1, ("sink", "buckets"): 1, ("metrics", "ready_intervals"): 1,
           ("schema_registry", "max_retries"): 0, ("trigger", "min_versions"): 1, ("state", "extremes", "kept"): 1}
# Fields given as a number or a duration string ("2s", "500ms"); checked by parse_duration in from_dict.
DURATIONS = {("source", "batch_interval"), ("trigger", "interval")}
# Fields that take one string as a one-element list.
STRING_OR_LIST = {("sink", "primary_key")}


def _lines(node: yaml.Node, at: Location, out: dict[Location, int]) -> None:
    """Every key's (1-based) line, and for the document the line of its first node."""
    out.setdefault(at, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                out[at + (key.value,)] = key.start_mark.line + 1
                _lines(value, at + (key.value,), out)


def _describe(expected: Any) -> str:
    if typing.get_origin(expected) in (typing.Union, types.UnionType):
        return " or ".join(_describe(t) for t in typing.get_args(expected) if t is not type(None))
    origin = typing.get_origin(expected) or expected
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            dict: "a mapping", list: "a list"}.get(origin, str(expected))


def _matches(value: Any, expected: Any) -> bool:
    if typing.get_origin(expected) in (typing.Union, types.UnionType):
        return any(_matches(value, t) for t in typing.get_args(expected))
    if expected is Any:
        return True
    if expected is type(None):
        return value is None
    origin = typing.get_origin(expected) or expected
    if origin is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, (str, int)) for k in value)
    if origin is list:
        (item,) = typing.get_args(expected) or (Any,)
        return isinstance(value, list) and all(_matches(v, item) for v in value)
    return isinstance(value, origin)


class _Checker:
    def __init__(self, name: str, lines: dict[Location, int]):
        self.name, self.lines = name, lines

    def error(self, at: Location, message: str) -> PipelineConfigError:
        line = next((self.lines[at[:n]] for n in range(len(at), -1, -1) if at[:n] in self.lines), 1)
        return PipelineConfigError(f"{self.name}:{line}: {message}")

    def keys(self, raw: dict, allowed: list[str], at: Location) -> None:
        for key in raw:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f" (expected one of {', '.join(allowed)})"
                where = f" in {'.'.join(at)}" if at else ""
                raise self.error(at + (str(key),), f"unknown key '{key}'{where}{hint}")

    def section(self, raw: Any, cls: type, at: Location) -> None:
        if not isinstance(raw, dict):
            raise self.error(at, f"{'.'.join(at)}: expected a mapping, got {raw!r}")
        hints = typing.get_type_hints(cls)
        self.keys(raw, [f.name for f in fields(cls)], at)
        for key, value in raw.items():
            if is_dataclass(hints[key]):   # a section inside a section (state.extremes)
                self.section(value, hints[key], at + (key,))
            else:
                self.value(at + (key,), value, hints[key])

    def value(self, at: Location, value: Any, expected: Any) -> None:
        name = ".".join(at)
        if at in DURATIONS:
            expected = float | str
        elif at in STRING_OR_LIST:
            expected = str | list[str]
        if not _matches(value, expected):
            minimum = MINIMUM.get(at)
            bound = f" >= {minimum}" if minimum is not None else ""
            raise self.error(at, f"{name}: expected {_describe(expected)}{bound}, got {value!r}")
        minimum = MINIMUM.get(at)
        if minimum is not None and value is not None and value < minimum:
            raise self.error(at, f"{name}: expected an integer >= {minimum}, got {value!r}")


def check_document(raw: Any, name: str, lines: dict[Location, int]) -> None:
    """Unknown keys, wrong types and out-of-range numbers of a parsed pipeline document, with lines."""
    check = _Checker(name, lines)
    if not isinstance(raw, dict):
        raise check.error((), f"a pipeline is a mapping with 'source' and 'sink' sections, got {raw!r}")
    hints = typing.get_type_hints(PipelineConfig)
    top = [f.name for f in fields(PipelineConfig)]
    check.keys(raw, top, ())
    for section, cls in SECTIONS.items():
        if section not in raw or section == "spark" and raw[section] is None:  # (an empty spark: is the default)
            if section in REQUIRED_SECTIONS:
                raise check.error((), f"a pipeline needs a '{section}' section")
            continue
        check.section(raw[section], cls, (section,))
    for key in top:
        if key in raw and key not in SECTIONS:
            check.value((key,), raw[key], hints[key] | None if key in ("seo_dir", "transform") else hints[key])


def load_pipeline_yaml(path: str | os.PathLike) -> PipelineConfig:
    """Read, check and build the config in ``path``; every problem is a PipelineConfigError naming
    ``file:line`` (relative paths in the file are taken relative to its directory)."""
    path = Path(path)
    text = path.read_text()
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f"{mark.line + 1}:" if mark is not None else ""
        raise PipelineConfigError(f"{path.name}:{line} malformed YAML: {e.problem or e}") from None
    lines: dict[Location, int] = {}
    if node is not None:
        _lines(node, (), lines)
    check_document(raw, path.name, lines)
    try:
        return PipelineConfig.from_dict(raw, base_dir=path.parent)
    except PipelineConfigError as e:
        # a semantic error (a value not among the allowed ones, a missing field): the line of the key named
        at = e.key or ()
        raise _Checker(path.name, lines).error(at, str(e)) from None
