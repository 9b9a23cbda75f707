"""The package's structure, checked from its source.

* no import cycles between the package's modules (``architecture_helpers``
  reads every ``import`` statement, function-local ones included, so a
  cycle cannot hide behind a late import or ``importlib``);
* the package's own imports are made at module level, except in the few
  places listed in ``LATE_IMPORTS`` with the reason;
* no private name (``_x``) is imported from another module of the package;
* no code outside ``oracle_rag/engines/`` asks which engine it runs on:
  engines differ through their statements (``Sql``) and their attributes
  and methods, never through ``engine.name`` comparisons or a string
  naming an engine;
* imports go down the layers (``architecture_helpers.LAYERS``), and
  ``docs/architecture.md`` shows the layers as ``python tests/architecture_helpers.py``
  prints them;
* every top-level module and package is named in ``docs/architecture.md``;
* every CLI command has help.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest
from architecture_helpers import LAYERS, PACKAGE, ROOT, build, module_name, render_layers, unit_edges, unit_of

from oracle_rag.cli import main

GRAPH = build()
ENGINE_NAMES = {"oracle", "sqlite"}

# Package imports that stay inside a function, each for a measured or structural reason.
LATE_IMPORTS = {
    # The MCP SDK costs ~1.7 s of CPU to import: only `oracle-rag mcp` pays it.
    ("oracle_rag.cli.integrations", "oracle_rag.integrations.mcp_server"),
    # The engine configured is the only one imported: the embedded engine loads sqlite-vec, which
    # imports the stdlib sqlite3 (a second SQLite binding: tests/test_sql_scripts.py) and numpy.
    ("oracle_rag.engines", "oracle_rag.engines.sqlite.engine"),
    ("oracle_rag.engines", "oracle_rag.engines.oracle.engine"),
}

# Modules outside engines/ that compare a dialect name, and why that is not an engine check.
DIALECT_CHECKS = {
    # A SQL source reads any SQLAlchemy database (PostgreSQL, MySQL...), not an engine of ours:
    # the read session and an Oracle source's watermark bind follow the source's dialect.
    "oracle_rag.sources.connections",
    "oracle_rag.sources.sql_query",
    # The dialect of the untrusted SQL being checked (engine.sql_dialect, handed in by the engine):
    # sqlglot's parse dialect, and the lexer's rules for identifiers in that dialect.
    "oracle_rag.answering.aggregate.guard",
    "oracle_rag.answering.aggregate.lexer",
}


def test_no_import_cycles() -> None:
    cycles = GRAPH.cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_graph_sees_the_package() -> None:
    """The check above is only as good as the graph: it must contain the known edges."""
    assert "oracle_rag.engines.base" in GRAPH.edges["oracle_rag.engines.sqlite.engine"]
    assert "oracle_rag.cli.context" in GRAPH.edges["oracle_rag.cli.web"]
    assert "oracle_rag.web.state" in GRAPH.edges["oracle_rag.web.api"]
    assert len(GRAPH.edges) > 80


def _layer_of() -> dict[str, tuple[int, bool]]:
    return {u: (n, peers) for n, (_title, units, peers) in enumerate(LAYERS) for u in units}


def test_every_module_has_a_layer() -> None:
    layer_of = _layer_of()
    missing = sorted({unit_of(m) for m in GRAPH.edges} - set(layer_of) - {""})
    assert not missing, f"units in no layer of architecture_helpers.LAYERS: {', '.join(missing)}"


def _is_late(module: str, target: str) -> bool:
    """``module -> target`` is a listed late import, or the package Python initialises on its way."""
    return any(module == m and (t == target or t.startswith(target + ".")) for m, t in LATE_IMPORTS)


def test_imports_go_down_the_layers() -> None:
    """An import goes to a lower layer, or to a peer where the layer says so; the engine seam's
    choice of engine (``create_engine``, a late import listed in LATE_IMPORTS) is the one exception."""
    layer_of = _layer_of()
    late = {(unit_of(m), unit_of(t)) for m, t in LATE_IMPORTS}
    wrong = []
    for (a, b), imports in unit_edges(GRAPH).items():
        (la, peers), (lb, _) = layer_of[a], layer_of[b]
        if la < lb or (la == lb and peers):
            continue
        late_only = (a, b) in late and all(_is_late(*i.split(" -> ")) for i in imports)
        if not late_only:
            wrong.append(f"{a} (layer {la + 1}) imports {b} (layer {lb + 1}): " + "; ".join(imports[:3]))
    assert not wrong, "imports that go up or across the layers:\n" + "\n".join(wrong)


def test_the_layer_check_finds_what_it_looks_for() -> None:
    """The layers are not vacuous: known edges go down them, and the reverse of one would be refused."""
    layer_of = _layer_of()
    edges = unit_edges(GRAPH)
    assert ("search", "engines") in edges and ("answering.chat", "search") in edges
    assert layer_of["engines"][0] > layer_of["search"][0] > layer_of["answering.chat"][0]
    assert len(edges) > 60


def test_the_architecture_doc_shows_the_layers() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    assert render_layers(GRAPH) in doc, (
        "docs/architecture.md's layers differ from the code's: paste the output of "
        "`python tests/architecture_helpers.py` into its layers block"
    )


def test_package_imports_are_made_at_module_level() -> None:
    late = sorted({(m, t) for m, _line, t in GRAPH.function_local} - LATE_IMPORTS)
    assert not late, "function-local imports of the package's own modules:\n" + "\n".join(
        f"{m} -> {t}" for m, t in late
    )


def test_no_private_name_is_imported_from_another_module() -> None:
    """``from .x import _name`` couples a module to another's internals: make the name public instead."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith("oracle_rag")
            ):
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def _engine_name_use(node: ast.AST) -> bool:
    """``engine.name`` / ``self.engine.name`` / ``rag.engine.name``."""
    if not (isinstance(node, ast.Attribute) and node.attr == "name"):
        return False
    owner = node.value
    last = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
    return last.endswith("engine")


def _engine_checks(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in ENGINE_NAMES for o in operands) or any(
                _engine_name_use(o) for o in operands
            ):
                found.append(f"line {node.lineno}: compares an engine name")
        elif isinstance(node, ast.Subscript) and _engine_name_use(node.slice):
            found.append(f"line {node.lineno}: looks something up by engine name")
        elif isinstance(node, ast.Call) and any(_engine_name_use(a) for a in node.args):
            found.append(f"line {node.lineno}: passes the engine's name around")
    return found


def test_nothing_outside_engines_asks_for_an_engine_name() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        # *_sql modules write each engine's text (helpers may build both); the engine picks one.
        if name.startswith("oracle_rag.engines") or name in DIALECT_CHECKS or name.endswith("_sql"):
            continue
        problems += [f"{path.relative_to(ROOT)} {p}" for p in _engine_checks(path)]
    assert not problems, "\n".join(problems)


def test_the_engine_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        'if engine.name == "oracle": pass\nx = STATEMENTS[self.engine.name]\n'
        'query(rag.engine.name, "X")\nif dialect != "sqlite": pass\n'
    )
    assert len(_engine_checks(sample)) == 4


def _top_level() -> list[str]:
    out = []
    for p in sorted(PACKAGE.iterdir()):
        if p.suffix == ".py" and p.name != "__init__.py":
            out.append(p.name)
        elif p.is_dir() and (p / "__init__.py").is_file():
            out.append(p.name + "/")
    return out


def test_every_top_level_module_is_in_the_architecture_doc() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    named = set(re.findall(r"`([a-z0-9_]+(?:\.py|/))`", doc))
    missing = [m for m in _top_level() if m not in named]
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        out.append((prefix + name, cmd))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, prefix + name + " ")
    return out


@pytest.mark.parametrize(("name", "command"), _commands(main), ids=[n for n, _ in _commands(main)])
def test_every_cli_command_has_help(name: str, command: click.Command) -> None:
    assert (command.help or "").strip(), f"oracle-rag {name} has no help"


# What the reference application calls things: the generic layers learn them from the sources'
# declarations (sources/meanings.py), so a team's own tables answer like the demo's tasks.
DOMAIN_NAMES = re.compile(
    r"\b(TASK|SPRINT|PROJECT|status|assignee_id|due_date|project_id|sprint_id|PROJECT_ID|SPRINT_ID)\b"
)
# The structured answerer, search (retriever, hybrid, fusion), the chat code that cites, composes answers and
# opens a record, the write path from the queue to the chunk table (queue, worker, indexer, backfill, records,
# the engine seam and its roles, the embedded engine's in-process indexes), and what a source is (Source, Facet,
# Meanings). A project or a sprint reaches them only as a facet the reference sources declare indexed
# (sources/reference_facets.py); engines/indexed_columns.py names RAG_CHUNK's two indexed facet columns, and
# engine_sql.py's statements name them as the schema does (neither is listed). Not yet:
# answering/chat/mentions.py + chat_sql.py (task ids the caller may not see are scrubbed from a model's prose),
# answering/chat/router.py and answering/chat/prompt.py (the model's routing and answering prompts describe a tracker).
GENERIC_LAYERS = (
    "oracle_rag/answering/structured",
    "oracle_rag/search",
    "oracle_rag/answering/chat/citations.py",
    "oracle_rag/answering/chat/answer.py",
    "oracle_rag/answering/chat/chunks.py",
    "oracle_rag/engines/records.py",
    "oracle_rag/engines/base.py",
    "oracle_rag/engines/sqlite/vector_cache.py",
    "oracle_rag/engines/sqlite/term_index.py",
    "oracle_rag/engines/roles.py",
    "oracle_rag/indexing/queue.py",
    "oracle_rag/indexing/worker.py",
    "oracle_rag/indexing/indexer.py",
    "oracle_rag/indexing/record_writes.py",
    "oracle_rag/indexing/backfill.py",
    "oracle_rag/sources/base.py",
    "oracle_rag/sources/facets.py",
    "oracle_rag/sources/meanings.py",
)
DOMAIN_EXCEPTIONS: set[str] = set()


def _domain_names(path: Path) -> list[str]:
    """Names of the reference domain in code: string constants (not docstrings) and identifiers."""
    tree = ast.parse(path.read_text("utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        if text is not None and DOMAIN_NAMES.search(text):
            found.append(f"line {getattr(node, 'lineno', '?')}: {DOMAIN_NAMES.search(text).group(0)!r}")
    return found


def _generic_modules() -> list[Path]:
    out = []
    for layer in GENERIC_LAYERS:
        path = ROOT / layer
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [p for p in out if str(p.relative_to(ROOT)) not in DOMAIN_EXCEPTIONS]


def test_generic_layers_do_not_name_the_reference_domain() -> None:
    problems = [f"{p.relative_to(ROOT)} {found}" for p in _generic_modules() for found in _domain_names(p)]
    assert not problems, "\n".join(problems)


def test_the_domain_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""A TASK docstring is prose."""\nx = "TASK"\ny = facets["status"]\nz = row.assignee_id\n'
        'w = "due_date < :today"\nv = hit.project_id\nu = "c.SPRINT_ID = :f_sprint"\n'
    )
    assert len(_domain_names(sample)) == 6
    assert len(_generic_modules()) > 20
