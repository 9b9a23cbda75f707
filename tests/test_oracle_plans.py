"""The Oracle suite's plan patterns (tests/oracle_plans.py), on plans in DBMS_XPLAN.DISPLAY's layout.

The suite cannot run here, so what its plan assertions would catch is
checked on plan texts laid out as DBMS_XPLAN prints them (the layout of the
FILTER and access/filter examples in Oracle's and Antognini's published
plans): a full scan padded to any width, a subquery FILTER over the ACL as
an operation or as a filter predicate, and the unnested join that passes.
"""

from __future__ import annotations

from oracle_plans import PlanRow, filters_over, full_scans, plan_rows, predicates

# A FILTER re-running the group subquery per chunk row (the shape a subquery under OR takes).
FILTER_PLAN = """Plan hash value: 2949544139

----------------------------------------------------------------------------------------------------------
| Id  | Operation                               | Name                 | Rows  | Bytes | Cost (%CPU)| Time     |
----------------------------------------------------------------------------------------------------------
|   0 | SELECT STATEMENT                        |                      |     1 |    39 |   418   (1)| 00:00:01 |
|   1 |  SORT AGGREGATE                         |                      |     1 |    39 |            |          |
|*  2 |   FILTER                                |                      |       |       |            |          |
|*  3 |    TABLE ACCESS FULL                    | RAG_CHUNK            |  5000 |   190K|   412   (1)| 00:00:01 |
|   4 |    NESTED LOOPS                         |                      |     1 |    52 |     3   (0)| 00:00:01 |
|   5 |     TABLE ACCESS BY INDEX ROWID         | RAG_CHUNK            |     1 |    26 |     2   (0)| 00:00:01 |
|*  6 |      INDEX UNIQUE SCAN                  | RAG_CHUNK_PK         |     1 |       |     1   (0)| 00:00:01 |
|   7 |     INLIST ITERATOR                     |                      |       |       |            |          |
|*  8 |      INDEX UNIQUE SCAN                  | RAG_CHUNK_ACL_PK     |     1 |    26 |     1   (0)| 00:00:01 |
----------------------------------------------------------------------------------------------------------

Predicate Information (identified by operation id):
---------------------------------------------------

   2 - filter(:SEE_ALL=1 OR "C"."ACCESS_PUBLIC"=1 OR "C"."ACCESS_OWNER"=TO_NUMBER(:CALLER_ID) OR  EXISTS
              (SELECT 0 FROM "RAG_CHUNK_ACL" "A","RAG_CHUNK" "C2" WHERE "C2"."CHUNK_ID"=:B1 AND
              "A"."SOURCE_ID"="C2"."SOURCE_ID"))
   3 - filter("C"."CHUNK_NO"=0)
   6 - access("C2"."CHUNK_ID"=:B1)
   8 - access(("A"."PRINCIPAL"=:ACCESS_GROUPS_1_1 OR "A"."PRINCIPAL"=:ACCESS_GROUPS_1_2))
"""

# The same subquery run as a filter predicate of an index scan (no FILTER operation).
PREDICATE_PLAN = """---------------------------------------------------------------
| Id  | Operation                     | Name              | Rows  |
---------------------------------------------------------------
|   0 | SELECT STATEMENT              |                   |     1 |
|   1 |  TABLE ACCESS BY INDEX ROWID  | RAG_CHUNK         |     1 |
|*  2 |   INDEX RANGE SCAN            | RAG_CHUNK_RECORD_IX |   10 |
|*  3 |    INDEX UNIQUE SCAN          | RAG_CHUNK_ACL_PK  |     1 |
---------------------------------------------------------------

Predicate Information (identified by operation id):
---------------------------------------------------

   2 - access("C"."CHUNK_NO"=0)
       filter(:SEE_ALL=1 OR  EXISTS (SELECT 0 FROM "RAG_CHUNK_ACL" "SCOPE_A" WHERE
              "SCOPE_A"."SOURCE_ID"=:B1))
   3 - access("SCOPE_A"."SOURCE_ID"=:B1)
"""

# The group chunks read once: a hash semi-join; a bind-only FILTER above it is not a subquery FILTER.
JOINED_PLAN = """------------------------------------------------------------------------------
| Id  | Operation                      | Name                | Rows  | Bytes |
------------------------------------------------------------------------------
|   0 | SELECT STATEMENT               |                     |     1 |    45 |
|   1 |  SORT AGGREGATE                |                     |     1 |    45 |
|*  2 |   FILTER                       |                     |       |       |
|*  3 |    HASH JOIN SEMI              |                     |   900 | 40500 |
|*  4 |     INDEX FAST FULL SCAN       | RAG_CHUNK_RECORD_IX |  5000 |   120K|
|   5 |     VIEW                       | VW_NSO_1            |  3000 | 39000 |
|   6 |      UNION-ALL                 |                     |       |       |
|   7 |       FAST DUAL                |                     |     1 |       |
|   8 |       NESTED LOOPS             |                     |  2999 | 77974 |
|   9 |        INLIST ITERATOR         |                     |       |       |
|* 10 |         INDEX RANGE SCAN       | RAG_CHUNK_ACL_PK    |    60 |  1560 |
|* 11 |        INDEX RANGE SCAN        | RAG_CHUNK_RECORD_IX |    50 |  1300 |
|  12 |    INDEX FULL SCAN (MIN/MAX)   | RAG_CHUNK_TERM_PK   |     1 |     9 |
------------------------------------------------------------------------------

Predicate Information (identified by operation id):
---------------------------------------------------

   2 - filter(:F_PROJECT IS NULL OR TO_NUMBER(:F_PROJECT) IS NOT NULL)
   3 - access(CASE WHEN (:SEE_ALL=1) THEN (-1) ELSE "C"."CHUNK_ID" END ="CHUNK_ID")
  10 - access("SCOPE_G"."PRINCIPAL"=:ACCESS_GROUPS_1_1 OR "SCOPE_G"."PRINCIPAL"=:ACCESS_GROUPS_1_2)
  11 - access("C"."SOURCE_TYPE"="SCOPE_G"."SOURCE_TYPE")

Note
-----
   - dynamic statistics used: dynamic sampling (level=2)
"""

_ACL = ("RAG_CHUNK_ACL", "RAG_CHUNK_GROUP")


def test_rows_carry_depth_operation_and_name_whatever_the_padding() -> None:
    rows = plan_rows(FILTER_PLAN)
    assert [(r.id, r.depth, r.operation, r.name) for r in rows[:4]] == [
        (0, 0, "SELECT STATEMENT", ""),
        (1, 1, "SORT AGGREGATE", ""),
        (2, 2, "FILTER", ""),
        (3, 3, "TABLE ACCESS FULL", "RAG_CHUNK"),
    ]
    assert rows[-1] == PlanRow(8, 5, "INDEX UNIQUE SCAN", "RAG_CHUNK_ACL_PK")


def test_a_full_scan_is_found_at_any_width_and_min_max_is_not_one() -> None:
    assert [r.id for r in full_scans(FILTER_PLAN, "RAG_CHUNK")] == [3]
    assert [r.id for r in full_scans(JOINED_PLAN, "RAG_CHUNK_RECORD")] == [4]
    assert full_scans(JOINED_PLAN, "RAG_CHUNK_TERM") == []  # FULL SCAN (MIN/MAX) reads one block
    padded = FILTER_PLAN.replace(
        "TABLE ACCESS FULL                    | RAG_CHUNK            |",
        "TABLE ACCESS FULL   | RAG_CHUNK_TERM |",
    )
    assert [r.name for r in full_scans(padded, "RAG_CHUNK_TERM")] == ["RAG_CHUNK_TERM"]


def test_predicates_join_their_continuation_lines() -> None:
    found = predicates(FILTER_PLAN)
    assert set(found) == {2, 3, 6, 8}
    assert found[2].startswith("filter(:SEE_ALL=1") and found[2].endswith('"C2"."SOURCE_ID"))')
    both = predicates(PREDICATE_PLAN)[2]
    assert both.startswith('access("C"."CHUNK_NO"=0) filter(') and "RAG_CHUNK_ACL" in both
    assert "dynamic statistics" not in " ".join(predicates(JOINED_PLAN).values())


def test_a_filter_over_the_acl_is_reported_as_operation_and_as_predicate() -> None:
    found = filters_over(FILTER_PLAN, _ACL)
    assert any(f.startswith("FILTER (id 2)") and "RAG_CHUNK_ACL_PK (id 8)" in f for f in found), found
    assert any(f.startswith("predicate of id 2") for f in found), found
    assert [f.split(":")[0] for f in filters_over(PREDICATE_PLAN, _ACL)] == [
        "predicate of id 2 runs a subquery over the ACL per row"
    ]


def test_the_joined_group_set_passes() -> None:
    # a FILTER above a join (bind-only predicates) has one child: nothing it re-runs per row
    assert filters_over(JOINED_PLAN, _ACL) == []
