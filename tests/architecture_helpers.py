"""The package's import graph, read from the source (nothing is imported).

An edge A -> B is an ``import`` or ``from ... import`` statement in module A
that names B (``from pkg import mod`` names ``pkg.mod`` when ``mod`` is a
submodule, else ``pkg``), plus the packages Python initialises on the way:
importing ``pkg.sub.mod`` first runs ``pkg/__init__.py`` and
``pkg/sub/__init__.py``, so A -> B also adds A -> each package containing B
that is not one of A's own packages (those are already being imported).
Imports under ``if TYPE_CHECKING:`` are left out: they never run.
``function_local`` lists the package's own imports made inside a function or
method body.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "oracle_rag"


@dataclass
class Graph:
    edges: dict[str, set[str]] = field(default_factory=dict)
    function_local: list[tuple[str, int, str]] = field(default_factory=list)  # (module, line, target)

    def cycles(self) -> list[list[str]]:
        """Strongly connected components with more than one module (or a self-import)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        out: list[list[str]] = []
        counter = [0]

        def visit(v: str) -> None:
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on_stack.add(v)
            for w in sorted(self.edges.get(v, ())):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in self.edges.get(v, ()):
                    out.append(sorted(comp))

        for v in sorted(self.edges):
            if v not in index:
                visit(v)
        return sorted(out)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def build(package: Path = PACKAGE) -> Graph:
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    top = package.name
    graph = Graph(edges={m: set() for m in files})

    def targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
        found: list[str] = []
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        else:
            base = _resolve(module, path.name == "__init__.py", node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append(sub if sub in files else base)
        return [t for t in found if t == top or t.startswith(top + ".")]

    for module, path in files.items():
        tree = ast.parse(path.read_text("utf-8"))

        def walk(nodes: list[ast.stmt], in_function: bool, module: str = module, path: Path = path) -> None:
            for node in nodes:
                if isinstance(node, ast.If) and _is_type_checking(node):
                    walk(node.orelse, in_function)
                    continue
                if isinstance(node, ast.Import | ast.ImportFrom):
                    for t in targets(module, path, node):
                        while t not in files and "." in t:
                            t = t.rsplit(".", 1)[0]
                        if t == module:
                            continue
                        graph.edges[module].add(t)
                        own = {module.rsplit(".", i)[0] for i in range(1, module.count(".") + 1)} | {module}
                        parts = t.split(".")
                        for n in range(1, len(parts)):
                            parent = ".".join(parts[:n])
                            if parent in files and parent not in own and parent != top:
                                graph.edges[module].add(parent)
                        if in_function and (module, node.lineno, t) not in graph.function_local:
                            graph.function_local.append((module, node.lineno, t))
                    continue
                inner = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                for child_field in ("body", "orelse", "finalbody", "handlers"):
                    children = getattr(node, child_field, None)
                    if isinstance(children, list):
                        stmts = [c for c in children if isinstance(c, ast.stmt)]
                        for h in children:
                            if isinstance(h, ast.ExceptHandler):
                                stmts.extend(h.body)
                        walk(stmts, in_function or inner)

        walk(tree.body, False)
    return graph


# --- layers -----------------------------------------------------------------------------------
# The package's layers, top to bottom (docs/architecture.md shows this list, printed by
# `python tests/architecture_helpers.py`). A unit is a top-level module or package of
# oracle_rag, or one of the subpackages named here. An import goes down the list, or stays in
# its unit; units of one layer may import each other only in a layer marked as peers (the ways in,
# the leaves), and never in a cycle (test_no_import_cycles).
LAYERS: list[tuple[str, tuple[str, ...], bool]] = [
    ("the ways in: parse, call, print", ("cli", "web", "integrations", "demo"), True),
    ("background work of a running product", ("background",), False),
    ("answers built on one configured system", ("answering.chat", "evaluation"), False),
    ("one configured instance: settings, engine, sources", ("system",), False),
    ("guarded text-to-SQL", ("answering.aggregate",), False),
    ("structured answers in SQL", ("answering.structured",), False),
    ("what the answerers share", ("answering",), False),
    ("the two flows: read (search) and write (indexing)", ("search", "indexing"), False),
    ("who asks and what they may see", ("callers",), False),
    ("what is indexed, and the schema", ("sources", "migrations"), False),
    ("each engine's own code", ("engines.sqlite", "engines.oracle"), False),
    ("the engine seam and the one statement mechanism", ("engines",), False),
    ("the model and the text analysis both flows share", ("embedding", "text"), False),
    (
        "leaves",
        (
            "config",
            "data_dir",
            "errors",
            "hosts",
            "logsafety",
            "progress",
            "sql_scripts",
            "tracing",
            "urlsafety",
        ),
        True,
    ),
]
SUBPACKAGE_UNITS = {
    "answering.chat",
    "answering.aggregate",
    "answering.structured",
    "engines.sqlite",
    "engines.oracle",
}


def unit_of(module: str) -> str:
    """``oracle_rag.answering.chat.answer`` -> ``answering.chat``; ``oracle_rag.config`` -> ``config``."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    two = ".".join(parts[:2])
    return two if two in SUBPACKAGE_UNITS else parts[0]


def unit_edges(graph: Graph) -> dict[tuple[str, str], list[str]]:
    """(unit A, unit B) -> the module imports behind A -> B, for A != B (the package root left out)."""
    out: dict[tuple[str, str], list[str]] = {}
    for a, targets in graph.edges.items():
        for b in targets:
            ua, ub = unit_of(a), unit_of(b)
            if ua and ub and ua != ub:
                out.setdefault((ua, ub), []).append(f"{a} -> {b}")
    return {k: sorted(v) for k, v in sorted(out.items())}


def render_layers(graph: Graph) -> str:
    """The layers and, under each unit, the units it imports: what docs/architecture.md shows."""
    edges = unit_edges(graph)
    lines = []
    for number, (title, units, peers) in enumerate(LAYERS, 1):
        lines.append(f"{number}. {title}" + (" (peers)" if peers else ""))
        for u in units:
            below = sorted(b for (a, b) in edges if a == u)
            shown = u.replace(".", "/") + "/" if (PACKAGE / u.replace(".", "/")).is_dir() else u + ".py"
            lines.append(f"   {shown:<22} -> {', '.join(below) if below else '(nothing of the package)'}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_layers(build()))
