"""The package's shape as docs/ARCHITECTURE.md draws it: no import cycle between modules (imports inside
functions and under TYPE_CHECKING included), no import against the layer order, and every source path the
document names exists."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tidelake"
DOC = ROOT / "docs" / "ARCHITECTURE.md"

# Which top-level parts of tidelake each part may import, as the document's first lines draw the arrows
# (a part may also import whatever those may, transitively). Each part imports itself freely.
LAYERS: dict[str, set[str]] = {
    "protocol": set(),
    "storage": set(),
    "observability": set(),
    "log": {"protocol", "storage"},
    "coordinator": {"log"},
    "cluster": {"log"},
    "security": {"protocol"},
    "schema_registry": {"security", "observability"},
    "broker": {"coordinator", "cluster", "security", "observability", "schema_registry"},
    "table": {"storage", "observability"},
    "lakeview": {"table"},
    "spark": {"table", "security", "observability"},
    "kafka_admin": {"protocol"},
    "console": {"table", "spark", "kafka_admin"},
    "demo": {"broker", "spark", "table"},
    "cli": {"broker", "lakeview", "spark", "console", "schema_registry", "demo"},
}
# modules every part may import (the document's last line), and the package itself ("": its version)
SHARED = {"errors", "fsutil", "tasks", "clock", "listen_socket", "process_lock", ""}


class Import(NamedTuple):
    importer: str
    imported: str
    line: int


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(known: dict[str, Path]) -> list[Import]:
    """Every import of a tidelake module by a tidelake module, wherever it is in the file. ``from P import
    N`` imports module P.N when there is one (a submodule), else P (a name defined in P)."""
    found = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parent + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target.startswith("tidelake") and target != name:
                    found.append(Import(name, target, node.lineno))
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def allowed(importer: str) -> set[str]:
    """What a part may import: its own arrows, followed transitively."""
    seen: set[str] = set()
    todo = [importer]
    while todo:
        for below in LAYERS[todo.pop()]:
            if below not in seen:
                seen.add(below)
                todo.append(below)
    return seen | SHARED | {importer}


def test_the_module_graph_has_no_cycle():
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for imp in imports(known):
        graph[imp.importer].add(imp.imported)
    edges = sorted(set(imports(known)))
    report = []
    for component in cycles(graph):
        members = set(component)
        report.append(" <-> ".join(component) + ": " + "; ".join(
            f"{e.importer} imports {e.imported} (line {e.line})" for e in edges
            if e.importer in members and e.imported in members))
    assert not report, "import cycles:\n" + "\n".join(report)


def test_every_part_of_the_package_has_its_place_in_the_layers():
    parts = {part(name) for name in modules()} - {""}
    assert parts <= set(LAYERS) | SHARED, f"not in LAYERS (nor docs/ARCHITECTURE.md): {parts - set(LAYERS) - SHARED}"


def test_no_import_goes_against_the_layers():
    upward = [f"{imp.importer} imports {imp.imported} (line {imp.line})" for imp in imports(modules())
              if part(imp.importer) in LAYERS and part(imp.imported) not in allowed(part(imp.importer))]
    assert not upward, "imports against docs/ARCHITECTURE.md's layers:\n" + "\n".join(upward)


def named_paths() -> list[tuple[int, str | None, str]]:
    """(line, section folder, path) of every source file or repository path the document names in
    backquotes: ``x.py`` (under the section's folder, or relative to tidelake/) and ``tidelake/...``,
    ``tests/...``, ``docs/...``, ``benchmarks/...``."""
    found = []
    section = None
    for number, line in enumerate(DOC.read_text().splitlines(), 1):
        heading = re.match(r"## (\w+)/", line)
        if line.startswith("## "):
            section = heading.group(1) if heading else None
        for token in re.findall(r"`([^`\s]+)`", line):
            if token.endswith(".py") or re.match(r"(tidelake|tests|docs|benchmarks)/", token):
                found.append((number, section, token))
    return found


def resolves(section: str | None, path: str) -> bool:
    places = [ROOT, PACKAGE] + ([PACKAGE / section] if section else [])
    if section:   # a file named in a list under one of the section's subfolders (handlers/, sasl/)
        places += [p for p in (PACKAGE / section).rglob("*") if p.is_dir()]
    return any(any(place.glob(path)) if "*" in path else (place / path).exists() for place in places)


def test_every_path_the_architecture_document_names_exists():
    missing = [f"docs/ARCHITECTURE.md:{number}: {path}" for number, section, path in named_paths()
               if not resolves(section, path)]
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_one_module_reads_points_in_time():
    """Times users type are parsed by tidelake/clock.py's ``parse_timestamp_ms`` alone."""
    parsers = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(PACKAGE.rglob("*.py")) if p != PACKAGE / "clock.py"
               for n, line in enumerate(p.read_text().splitlines(), 1) if "fromisoformat(" in line]
    assert not parsers, "parse times with tidelake.clock.parse_timestamp_ms, not here:\n" + "\n".join(parsers)


# Called by a framework through the name of the method they override, never by name in this repository.
FRAMEWORK_CALLBACKS = {
    "tidelake/broker/__init__.py: __getattr__",                         # PEP 562
    "tidelake/observability/server.py: _QuietHandler.log_message",     # http.server
    "tidelake/security/requested_auth.py: TlsServerProtocol.eof_received",   # asyncio.Protocol
    "tidelake/spark/runner.py: _ListAccumulator.zero",                 # pyspark's AccumulatorParam
    "tidelake/spark/runner.py: _ListAccumulator.addInPlace",
    "tidelake/spark/kafka_source.py: KafkaDataSource.streamReader",    # pyspark's Python data sources
    "tidelake/spark/kafka_source.py: KafkaStreamReader.initialOffset",
    "tidelake/spark/kafka_source.py: KafkaStreamReader.getDefaultReadLimit",
    "tidelake/spark/kafka_source.py: KafkaStreamReader.prepareForTriggerAvailableNow",
    "tidelake/spark/kafka_source.py: KafkaStreamReader.latestOffset",
    "tidelake/spark/kafka_source.py: KafkaStreamReader.reportLatestOffset",
    "tidelake/spark/table_source.py: TableDataSource.streamReader",
    "tidelake/spark/table_source.py: TableDataSource.streamWriter",
    "tidelake/spark/table_source.py: TableReader.pushFilters",
    "tidelake/spark/table_stream.py: TableStreamReader.initialOffset",
    "tidelake/spark/table_stream.py: TableStreamReader.getDefaultReadLimit",
    "tidelake/spark/table_stream.py: TableStreamReader.prepareForTriggerAvailableNow",
    "tidelake/spark/table_stream.py: TableStreamReader.latestOffset",
    "tidelake/spark/table_stream.py: TableStreamReader.reportLatestOffset",
}


def test_every_function_and_class_is_used():
    """No dead code: every undecorated function, class and method of tidelake is named somewhere in tidelake,
    tests or benchmarks besides its own definition (framework callbacks aside). A coarse check (any use of the
    name counts), so it misses dead code sharing a live name, but never flags live code."""
    used: set[str] = set()
    definitions = []
    for path in sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py")) + \
            sorted((ROOT / "benchmarks").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.alias):
                used.add(node.name.rpartition(".")[2])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                used.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
        if path.is_relative_to(PACKAGE):
            where = str(path.relative_to(ROOT))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.decorator_list:
                    definitions.append((f"{where}: {node.name}", node.name, node.lineno))
                if isinstance(node, ast.ClassDef):
                    definitions += [(f"{where}: {node.name}.{item.name}", item.name, item.lineno) for item in node.body
                                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                                    and not item.decorator_list and not item.name.startswith("__")]
    dead = [f"{label} (line {line})" for label, name, line in definitions
            if name not in used and label not in FRAMEWORK_CALLBACKS]
    assert not dead, "never used:\n" + "\n".join(dead)


def test_the_checks_see_what_they_look_for():
    """The graph and the path check are not vacuous: they find the imports and paths they must."""
    edges = {(e.importer, e.imported) for e in imports(modules())}
    assert ("tidelake.broker.server", "tidelake.broker.dispatch") in edges
    assert ("tidelake.cli.broker", "tidelake.broker.config") in edges   # an import inside a function
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert len(named_paths()) > 100
    assert not resolves("broker", "record_validation.py")
