"""The broker is wired once, in ``Broker.__init__``: its components get what they need through their
constructors and explicit methods; the server sets no attribute on another object from outside."""
from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "tidelake" / "broker" / "server.py"


def attribute_writes_from_outside(source: str) -> list[str]:
    """Assignments to an attribute of anything but ``self`` (``x.attr = ...``, ``x[k].attr += ...``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            if isinstance(target, ast.Attribute) and not (isinstance(target.value, ast.Name)
                                                          and target.value.id == "self"):
                found.append(f"line {node.lineno}: {ast.unparse(target)}")
    return found


def test_the_server_sets_no_attribute_on_its_components():
    assert attribute_writes_from_outside(SERVER.read_text()) == []


def test_the_check_sees_what_it_looks_for():
    assert attribute_writes_from_outside("self.a = 1\npartitions.cluster = c\nctx.e[n].port = 2\n") == [
        "line 2: partitions.cluster", "line 3: ctx.e[n].port"]
