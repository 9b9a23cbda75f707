"""Reading DBMS_XPLAN.DISPLAY output by pattern, not by spacing: what the Oracle suite asserts about plans.

DBMS_XPLAN pads the Operation and Name columns to the widest row of the
plan, and indents each operation by its depth, so a plan line such as
``|*  3 |    TABLE ACCESS FULL          | RAG_CHUNK_TERM |`` has no fixed
spacing a substring test could match. These helpers parse the plan table
(Id, Operation, Name) and the "Predicate Information" section, and answer
the questions the suite asks: is any object of a family read by a full
scan, and is any subquery over the ACL run as a FILTER (once per row)
instead of being joined.

The parser runs everywhere (``tests/test_oracle_plans.py`` feeds it plans
in DBMS_XPLAN's documented layout); the plans themselves only come from a
live Oracle (``tests/oracle/``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ROW = re.compile(r"^\|\s*(\*?)\s*(\d+)\s*\|(.*?)\|(.*?)\|")
_PREDICATE = re.compile(r"^\s*(\d+)\s+-\s+(access|filter|storage)\((.*)$")
# Full reads of a segment: TABLE ACCESS [STORAGE] FULL, INDEX FULL SCAN, INDEX FAST FULL SCAN,
# MAT_VIEW ACCESS FULL. "INDEX FULL SCAN (MIN/MAX)" is one block, not a full read.
_FULL = re.compile(r"\bFULL\b(?!\s+SCAN\s+\(MIN/MAX\))")


@dataclass(frozen=True)
class PlanRow:
    """One row of the plan table: its id, depth (the operation's indentation), operation and object."""

    id: int
    depth: int
    operation: str
    name: str


def plan_rows(plan: str) -> list[PlanRow]:
    """The plan table's rows, in order (an empty list for a text without one)."""
    rows = []
    for line in plan.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        op = m.group(3)
        # Id 0 sits one space after the column bar; each level below adds one.
        depth = len(op) - len(op.lstrip(" ")) - 1
        rows.append(PlanRow(int(m.group(2)), depth, op.strip(), m.group(4).strip()))
    return rows


def predicates(plan: str) -> dict[int, str]:
    """The "Predicate Information" entries by operation id, continuation lines joined."""
    out: dict[int, str] = {}
    current = None
    in_section = False
    for line in plan.splitlines():
        if line.startswith("Predicate Information"):
            in_section = True
            continue
        if not in_section:
            continue
        m = _PREDICATE.match(line)
        if m:
            current = int(m.group(1))
            out[current] = (out.get(current, "") + " " + m.group(2) + "(" + m.group(3)).strip()
        elif (
            current is not None
            and line.strip()
            and not line.startswith("Note")
            and not set(line.strip()) <= {"-"}
        ):
            out[current] += " " + line.strip()
        elif line.startswith("Note"):
            break
    return out


def full_scans(plan: str, name_prefix: str) -> list[PlanRow]:
    """Rows reading a whole segment whose name starts with ``name_prefix`` (a table or one of its indexes)."""
    prefix = name_prefix.upper()
    return [r for r in plan_rows(plan) if _FULL.search(r.operation) and r.name.upper().startswith(prefix)]


def subtree(rows: list[PlanRow], index: int) -> list[PlanRow]:
    """The rows under ``rows[index]`` (deeper rows that follow it)."""
    out = []
    for r in rows[index + 1 :]:
        if r.depth <= rows[index].depth:
            break
        out.append(r)
    return out


def filters_over(plan: str, names: tuple[str, ...]) -> list[str]:
    """Every sign that a subquery reading one of ``names`` runs as a FILTER, once per row.

    Two signs, either is enough: a FILTER operation whose second or later
    child reads one of the objects (the subquery a FILTER re-runs per row;
    its first child is the row source it filters), and a ``filter(...)``
    predicate holding a ``SELECT`` that names one of them (DBMS_XPLAN prints a
    filter subquery as ``EXISTS (SELECT 0 FROM "RAG_CHUNK_ACL" ...)``). A
    subquery unnested into a join shows neither: its object is a child of a
    join and its predicate is an ``access(...)`` or ``filter(...)`` without
    ``SELECT``.
    """
    wanted = tuple(n.upper() for n in names)

    def reads(row: PlanRow) -> bool:
        return row.name.upper().startswith(wanted)

    found = []
    rows = plan_rows(plan)
    for i, row in enumerate(rows):
        if row.operation != "FILTER":
            continue
        below = subtree(rows, i)
        children = [j for j, r in enumerate(below) if r.depth == row.depth + 1]
        for first, nxt in zip(children[1:], [*children[2:], len(below)], strict=True):
            hit = [r for r in below[first:nxt] if reads(r)]
            if hit:
                found.append(
                    f"FILTER (id {row.id}) re-runs a subquery reading {hit[0].name} (id {hit[0].id})"
                )
    for op_id, text in predicates(plan).items():
        upper = text.upper()
        if "SELECT" in upper and any(f'"{n}"' in upper for n in wanted):
            found.append(f"predicate of id {op_id} runs a subquery over the ACL per row: {text[:200]}")
    return found
