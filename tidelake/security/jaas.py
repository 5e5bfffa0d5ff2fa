"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule class> required key="value" ...;``.

The broker reads PLAIN users from ``listener.name.<listener>.plain.sasl.jaas.config``
(PlainLoginModule's ``user_<name>="<password>"`` options), as Kafka does."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')
_FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    pass


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    options: dict[str, str]

    def users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>`` options: name -> password."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def parse_jaas(text: str) -> JaasEntry:
    s = text.strip()
    if not s.endswith(";"):
        raise JaasError("a JAAS config ends with ';'")
    s = s[:-1]
    head = re.match(r"\s*([A-Za-z0-9_.$]+)\s+([a-z]+)", s)
    if head is None or head.group(2) not in _FLAGS:
        raise JaasError("expected '<LoginModule class> required key=\"value\" ...;'")
    pos = head.end()
    options: dict[str, str] = {}
    while pos < len(s):
        if not s[pos:].strip():
            break
        m = _OPTION.match(s, pos)
        if m is None:
            raise JaasError(f"cannot parse JAAS options at {s[pos:pos + 20]!r}")
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[m.group(1)] = value
        pos = m.end()
    return JaasEntry(head.group(1), options)


def listener_login(lookup: Callable[[str], str | None], listener: str, mechanism: str, login_module: str,
                   example: str) -> JaasEntry:
    """``listener.name.<listener>.<mechanism>.sasl.jaas.config`` parsed, naming ``login_module`` (``example``: what
    to set when it is missing); a JaasError naming the key otherwise."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = lookup(key)
    if text is None:
        raise JaasError(f"{key} is required for {mechanism} on listener {listener} ({example})")
    try:
        entry = parse_jaas(text)
    except JaasError as e:
        raise JaasError(f"{key}: {e}") from None
    if entry.login_module != login_module:
        raise JaasError(f"{key}: {mechanism} uses {login_module}, not {entry.login_module}")
    return entry
