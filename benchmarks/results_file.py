"""benchmarks/RESULTS.md: each benchmark rewrites its own section and leaves the others as they are."""
from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def replace_marked(start: str, end: str, body_lines: list[str], path: Path = RESULTS) -> None:
    """The text between the ``start`` and ``end`` marker lines (both kept) becomes ``body_lines``;
    appended at the end when the markers are not there yet."""
    body = "\n".join([start, *body_lines, end])
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if start in text and end in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _m: body, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    path.write_text(text)


def replace_heading(heading: str, section: str, path: Path = RESULTS) -> None:
    """The ``## heading`` section (up to the next ``## ``) becomes ``section``; appended when missing."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    block = f"## {heading}\n\n" + section.strip() + "\n"
    m = re.search(rf"^## {re.escape(heading)}\n.*?(?=^## |\Z)", text, flags=re.S | re.M)
    text = text[:m.start()] + block + "\n" + text[m.end():] if m else text.rstrip() + "\n\n" + block
    path.write_text(text)
