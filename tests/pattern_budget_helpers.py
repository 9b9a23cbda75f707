"""The package's regular expressions, and inputs that make a backtracking engine work hard.

Used by tests/test_pattern_budget.py and bench/text_fuzz.py. Patterns are
found three ways: compiled objects reachable from each module (constants,
tuples of them, class attributes), literal patterns passed to ``re`` calls
anywhere in the source (found in the syntax tree, so a pattern written inline
in a function is not missed), and patterns the package builds at run time
from a vocabulary (record words, the parser's id patterns), built here over
the reference app's declarations.

Inputs come from each pattern's own parse tree: for every unbounded repeat,
a string the pattern matches with that repeat pumped to a long run of what it
repeats (each character it accepts that the pattern also names, a plain one,
each alternative of a repeated group), followed by the rest of the match, by
nothing, or by a character no pattern expects; plus long runs of single
characters and of the pattern's own cut-short match. That is where
backtracking hurts: a run one pattern can split several ways, a start tried at
every position of a run.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from re import _compiler as sre_compile  # type: ignore[attr-defined]
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import oracle_rag

PACKAGE = Path(oracle_rag.__file__).resolve().parent
_CALLS = {"compile", "match", "search", "fullmatch", "sub", "subn", "findall", "finditer", "split"}
# Characters tried where a pattern accepts "any" of a class: common text, separators, and the
# characters normalisation or typography brings (no-break space, zero-width space, dashes, º).
UNIVERSE = " a1x#.,-_\n\t[](){}/:;'\"*`AZ0éº\u00a0\u200b!?@&+=<>|\\$%^~–—°"
NEAR_MISS = "\x00"
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


# -- finding the patterns -------------------------------------------------------------------
def package_modules() -> list[Any]:
    modules = [oracle_rag]
    for info in pkgutil.walk_packages(oracle_rag.__path__, "oracle_rag."):
        if not info.name.endswith("__main__"):  # running it is the CLI
            modules.append(importlib.import_module(info.name))
    return modules


def _patterns_in(value: Any, depth: int = 0) -> Iterator[re.Pattern[str]]:
    if isinstance(value, re.Pattern):
        if isinstance(value.pattern, str):
            yield value
    elif depth < 3 and isinstance(value, tuple | list | set | frozenset):
        for item in value:
            yield from _patterns_in(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _patterns_in(item, depth + 1)


@dataclass(frozen=True)
class Found:
    """A pattern, and how the package applies it: ``search`` (every start: finditer, sub, findall ...),
    ``match`` (one start) or ``fullmatch``."""

    pattern: re.Pattern[str]
    uses: frozenset[str]


_USE = {
    "compile": "search",
    "search": "search",
    "finditer": "search",
    "findall": "search",
    "sub": "search",
    "subn": "search",
    "split": "search",
    "match": "match",
    "fullmatch": "fullmatch",
}


def _uses(source: str, name: str) -> frozenset[str]:
    """How ``source`` applies the pattern bound to ``name`` (unknown: empty)."""
    return frozenset(_USE[c] for c in re.findall(rf"\b{re.escape(name)}\.(\w+)\(", source) if c in _USE)


def module_patterns() -> dict[str, Found]:
    """Every compiled pattern a module of the package holds (and its classes hold), by name."""
    found: dict[str, Found] = {}
    for module in package_modules():
        source = Path(module.__file__).read_text(encoding="utf-8") if module.__file__ else ""
        for name, value in vars(module).items():
            if isinstance(value, type) and value.__module__ == module.__name__:
                for attr, member in vars(value).items():
                    for p in _patterns_in(member):
                        found.setdefault(f"{module.__name__}.{name}.{attr}", Found(p, _uses(source, attr)))
            for i, p in enumerate(_patterns_in(value)):
                uses = _uses(source, name) if isinstance(value, re.Pattern) else frozenset()
                found.setdefault(f"{module.__name__}.{name}" + (f"[{i}]" if i else ""), Found(p, uses))
    return found


def _flags(node: ast.expr | None) -> int | None:
    if node is None:
        return 0
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
        return int(getattr(re, node.attr))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _flags(node.left), _flags(node.right)
        return None if left is None or right is None else left | right
    return None


def literal_patterns() -> dict[str, Found]:
    """Every literal pattern given to ``re.<call>`` in the package's source, by file and line."""
    found: dict[str, Found] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in _CALLS
                and node.args
            ):
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            position = {
                "compile": 1,
                "match": 2,
                "search": 2,
                "fullmatch": 2,
                "findall": 2,
                "finditer": 2,
                "split": 3,
                "sub": 4,
                "subn": 4,
            }[node.func.attr]
            flag_node = (
                node.args[position]
                if len(node.args) > position
                else next((k.value for k in node.keywords if k.arg == "flags"), None)
            )
            flags = _flags(flag_node)
            if flags is None:
                continue
            uses = frozenset() if node.func.attr == "compile" else frozenset({_USE[node.func.attr]})
            found[f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"] = Found(
                re.compile(first.value, flags), uses
            )
    return found


def built_patterns() -> dict[str, Found]:
    """Patterns the package builds from declarations, built over the reference app's vocabulary."""
    from oracle_rag.answering.chat.mentions import RecordWords
    from oracle_rag.answering.structured.understanding import QueryParser
    from oracle_rag.answering.structured.vocabulary import build_vocabulary
    from oracle_rag.sources.meanings import Declaration
    from oracle_rag.sources.reference import TaskSource

    vocab = build_vocabulary(
        [Declaration("TASK", tuple(TaskSource.facets), TaskSource.meanings)],
        {"status": {"TODO", "BLOCKED", "DONE"}, "priority": {"HIGH", "LOW"}},
        {"assignee_id": {9: "Ana Ruiz", 10: "Bob Lee"}},
    )
    found: dict[str, Found] = {}
    words = RecordWords.of({**vocab.type_words, "purchase order": ["ORDERS"]}, vocab.types)
    found["RecordWords.head"] = Found(words.head, frozenset({"search"}))
    for i, (_types, pattern) in enumerate(QueryParser(vocab)._id_patterns):
        found[f"QueryParser._id_patterns[{i}]"] = Found(pattern, frozenset({"search"}))
    return found


def all_patterns() -> dict[str, Found]:
    """Every pattern, once (the first name found for it), with every use found under any name; a
    pattern whose use is not written as ``NAME.<call>(`` (one held in a tuple) counts as searched."""
    out: dict[tuple[str, int], tuple[str, Found]] = {}
    for name, f in {**module_patterns(), **literal_patterns(), **built_patterns()}.items():
        key = (f.pattern.pattern, f.pattern.flags)
        first, known = out.get(key, (name, Found(f.pattern, frozenset())))
        out[key] = (first, Found(f.pattern, known.uses | f.uses))
    return {name: Found(f.pattern, f.uses or frozenset({"search"})) for name, f in out.values()}


# -- inputs that hurt --------------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """Inputs of one shape at any size: ``make(length)`` is about ``length`` characters."""

    label: str
    make: Callable[[int], str]


class _Sampler:
    """Strings a pattern matches, read off its parse tree, with one repeat pumped to a long run."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.tree = sre_parse.parse(pattern.pattern, pattern.flags)
        self.flags = pattern.flags
        self.literals: set[str] = set()
        self.repeats: list[tuple[Any, ...]] = []
        self._walk(self.tree)
        self._single: dict[int, re.Pattern[str]] = {}

    def _walk(self, seq: Any) -> None:
        for node in seq:
            op, av = node
            if op is sre.LITERAL:
                self.literals.add(chr(av))
            elif op is sre.IN:
                self.literals.update(chr(v) for o, v in av if o is sre.LITERAL)
            elif op in _REPEATS:
                if av[1] is sre.MAXREPEAT or av[1] > 50:
                    self.repeats.append(node)
                self._walk(av[2])
            elif op is sre.BRANCH:
                for b in av[1]:
                    self._walk(b)
            elif op is sre.SUBPATTERN:
                self._walk(av[3])
            elif op in (sre.ATOMIC_GROUP,):
                self._walk(av)
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                self._walk(av[1])
            elif op is sre.GROUPREF_EXISTS:
                self._walk(av[1])
                if av[2] is not None:
                    self._walk(av[2])

    def accepts(self, node: Any, ch: str) -> bool:
        compiled = self._single.get(id(node))
        if compiled is None:
            compiled = sre_compile.compile(sre_parse.SubPattern(self.tree.state, [node]), self.flags)
            self._single[id(node)] = compiled
        return compiled.fullmatch(ch) is not None

    def chars(self, node: Any) -> list[str]:
        """Characters a one-character node accepts: those the pattern names, and a plain one."""
        accepted = [c for c in dict.fromkeys([*sorted(self.literals), *UNIVERSE]) if self.accepts(node, c)]
        named = [c for c in accepted if c in self.literals]
        plain = [c for c in accepted if c not in self.literals][:2]
        return (named + plain)[:8]

    def contains(self, seq: Any, target: Any) -> bool:
        for node in seq:
            if node is target:
                return True
            op, av = node
            subs: list[Any] = []
            if op in _REPEATS:
                subs = [av[2]]
            elif op is sre.BRANCH:
                subs = list(av[1])
            elif op is sre.SUBPATTERN:
                subs = [av[3]]
            elif op is sre.ATOMIC_GROUP:
                subs = [av]
            elif op is sre.GROUPREF_EXISTS:
                subs = [s for s in av[1:] if s is not None]
            if any(self.contains(s, target) for s in subs):
                return True
        return False

    def sample(self, seq: Any, target: Any = None, run: str = "") -> str:
        out: list[str] = []
        for node in seq:
            op, av = node
            if op is sre.LITERAL:
                out.append(chr(av))
            elif op in (sre.NOT_LITERAL, sre.ANY, sre.IN):
                chars = self.chars(node)
                out.append(chars[-1] if chars else "")
            elif op is sre.BRANCH:
                branches = av[1]
                chosen = next(
                    (b for b in branches if target is not None and self.contains(b, target)), branches[0]
                )
                out.append(self.sample(chosen, target, run))
            elif op is sre.SUBPATTERN:
                out.append(self.sample(av[3], target, run))
            elif op is sre.ATOMIC_GROUP:
                out.append(self.sample(av, target, run))
            elif op in _REPEATS:
                low, _high, body = av
                if node is target:
                    out.append(run)
                elif target is not None and self.contains(body, target):
                    out.append(self.sample(body, target, run) + self.sample(body) * max(0, low - 1))
                else:
                    out.append(self.sample(body) * min(low, 100))
            elif op is sre.GROUPREF_EXISTS:
                out.append(self.sample(av[1], target, run))
        return "".join(out)

    def bodies(self, repeat: Any) -> list[str]:
        body = repeat[1][2]
        if len(body) == 1 and body[0][0] in (sre.NOT_LITERAL, sre.ANY, sre.IN, sre.LITERAL):
            return self.chars(body[0])
        inner = body
        while len(inner) == 1 and inner[0][0] is sre.SUBPATTERN:
            inner = inner[0][1][3]
        options = [self.sample(body)]
        if len(inner) == 1 and inner[0][0] is sre.BRANCH:
            options += [self.sample(b) for b in inner[0][1][1]][:10]
        return [o for o in dict.fromkeys(options) if o]


def _sized(prefix: str, unit: str, suffix: str) -> Callable[[int], str]:
    def make(length: int) -> str:
        return prefix + unit * max(1, (length - len(prefix) - len(suffix)) // len(unit)) + suffix

    return make


def families(pattern: re.Pattern[str]) -> list[Family]:
    """The adversarial input shapes for one pattern (module docstring)."""
    s = _Sampler(pattern)
    out: dict[tuple[str, str, str], str] = {}
    for repeat in s.repeats:
        marker = "\uffff"
        whole = s.sample(s.tree, repeat, marker)
        prefix, _, suffix = whole.partition(marker)
        for body in s.bodies(repeat):
            for tail, label in ((suffix, "match"), ("", "cut"), (NEAR_MISS, "near-miss")):
                out.setdefault(
                    (prefix, body, tail), f"{label}: {prefix[:12]!r} + {body[:12]!r}* + {tail[:12]!r}"
                )
            out.setdefault(("", prefix + body, ""), f"starts: ({prefix[:12]!r} + {body[:12]!r})*")
    whole = s.sample(s.tree)
    for unit in {whole, whole[:-1], whole + " "}:
        if unit:
            out.setdefault(("", unit, ""), f"repeated match: {unit[:16]!r}*")
    for ch in sorted(s.literals | set(" a1#\n")):
        out.setdefault(("", ch, ""), f"run: {ch!r}*")
    for pair in ("a ", "1 ", "1,", "a."):
        out.setdefault(("", pair, ""), f"run: {pair!r}*")
    return [Family(label, _sized(*shape)) for shape, label in out.items()]


# -- cost -------------------------------------------------------------------------------------
_BASELINE = re.compile(r"(?s).")


def exercise(found: Found, text: str) -> None:
    """What the package does with a pattern: every match (a search tries every start), or one."""
    pattern = found.pattern
    if "search" in found.uses:
        for _ in pattern.finditer(text):
            pass
    if "match" in found.uses:
        pattern.match(text)
    if "fullmatch" in found.uses:
        pattern.fullmatch(text)


def cpu(call: Callable[[], Any], at_least: float = 0.0002) -> float:
    """CPU seconds of one ``call``, repeated until ``at_least`` has passed (for small inputs)."""
    runs, started = 0, time.process_time()
    while True:
        call()
        runs += 1
        spent = time.process_time() - started
        if spent >= at_least:
            return spent / runs


def baseline(text: str) -> float:
    """A linear pass of the regex engine over ``text``: one match object per character."""
    return cpu(lambda: [None for _ in _BASELINE.finditer(text)])


LENGTHS = (8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, 4096, 8192)


@dataclass
class Verdict:
    ok: bool
    length: int = 0
    ratio: float = 0.0
    seconds: float = 0.0
    what: str = ""


def growth(pattern: Found, family: Family, lengths: tuple[int, ...] = LENGTHS, slack: float = 1.0) -> Verdict:
    """Does the cost grow linearly with the input? Compared within this run, so machine speed cancels.

    Superlinear: a step of 1.5-2x length costing over 5x (exponential), or a 4x length costing over
    10x (quadratic: 16x), *and* the cost over ``slack`` times a linear pass of the regex engine over
    the same text plus a small floor (so timer noise on tiny inputs is never a finding). A finding
    is measured again (best of five) before it counts.
    """
    costs: dict[int, float] = {}
    texts: dict[int, str] = {}
    previous = 0
    for length in lengths:
        text = family.make(length)
        texts[length] = text
        costs[length] = cpu(lambda: exercise(pattern, text))  # noqa: B023
        quarter = next((lo for lo in lengths if lo * 4 == length), None)
        for before, limit in ((previous, 5.0), (quarter, 10.0)):
            if not before or costs[length] <= limit * costs[before]:
                continue
            floor = slack * baseline(text) + 0.0002
            if costs[length] <= floor:
                continue
            again = min(cpu(lambda: exercise(pattern, texts[length])) for _ in range(5))  # noqa: B023
            first = min(cpu(lambda: exercise(pattern, texts[before])) for _ in range(5))  # noqa: B023
            if again > limit * first and again > floor:
                return Verdict(False, len(text), again / max(first, 1e-9), again, family.label)
        previous = length
    return Verdict(True, len(texts[lengths[-1]]), 0.0, costs[lengths[-1]], family.label)
