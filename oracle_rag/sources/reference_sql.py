"""The reference application's read statements (portable: one text for Oracle and SQLite).

Ids arrive as strings (RAG_CHUNK.SOURCE_ID is text so SQL-query sources can
use any key); these statements bind them as integers.
"""

from oracle_rag.engines.statements import Sql

TASKS = Sql.both(
    """SELECT t.TASK_ID, t.TITLE, t.DESCRIPTION, t.STATUS, t.PRIORITY, t.SPRINT_ID, t.PROJECT_ID,
       t.ASSIGNEE_ID, t.STORY_POINTS, t.ESTIMATED_HOURS, t.DUE_DATE,
       s.NAME AS SPRINT_NAME, s.STATUS AS SPRINT_STATUS, p.NAME AS PROJECT_NAME, e.FIRST_NAME, e.LAST_NAME
FROM TASK t
JOIN PROJECT p ON p.PROJECT_ID = t.PROJECT_ID
LEFT JOIN SPRINT s ON s.SPRINT_ID = t.SPRINT_ID
LEFT JOIN EMPLOYEE e ON e.EMPLOYEE_ID = t.ASSIGNEE_ID
WHERE t.TASK_ID IN :ids""",
    expanding=("ids",),
)

TASK_COMMENTS = Sql.both(
    """SELECT c.TASK_ID, c.BODY, e.FIRST_NAME, e.LAST_NAME
FROM TASK_COMMENT c
JOIN EMPLOYEE e ON e.EMPLOYEE_ID = c.AUTHOR_ID
WHERE c.TASK_ID IN :ids
ORDER BY c.TASK_ID, c.CREATED_AT, c.COMMENT_ID""",
    expanding=("ids",),
)

SPRINTS = Sql.both(
    """SELECT s.SPRINT_ID, s.NAME, s.STATUS, s.START_DATE, s.END_DATE, s.GOAL, s.PROJECT_ID,
       p.NAME AS PROJECT_NAME
FROM SPRINT s
JOIN PROJECT p ON p.PROJECT_ID = s.PROJECT_ID
WHERE s.SPRINT_ID IN :ids""",
    expanding=("ids",),
)

PROJECTS = Sql.both(
    """SELECT p.PROJECT_ID, p.NAME, p.STATUS, p.START_DATE, p.END_DATE, p.DESCRIPTION
FROM PROJECT p
WHERE p.PROJECT_ID IN :ids""",
    expanding=("ids",),
)

TASK_IDS = Sql.both("SELECT TASK_ID FROM TASK ORDER BY TASK_ID")
SPRINT_IDS = Sql.both("SELECT SPRINT_ID FROM SPRINT ORDER BY SPRINT_ID")
PROJECT_IDS = Sql.both("SELECT PROJECT_ID FROM PROJECT ORDER BY PROJECT_ID")

# Names for the facets' ids (organisational data every caller may see). The people are the reference
# application's declaration of a deployment's [people] query (oracle_rag/callers/people.py runs it the
# same way).
PEOPLE_QUERY = "SELECT EMPLOYEE_ID, FIRST_NAME, LAST_NAME FROM EMPLOYEE ORDER BY EMPLOYEE_ID"
PROJECT_NAMES = Sql.both("SELECT PROJECT_ID, NAME FROM PROJECT ORDER BY PROJECT_ID")
SPRINT_NAMES = Sql.both("SELECT SPRINT_ID, NAME FROM SPRINT ORDER BY SPRINT_ID")

# Whether the reference application is there: every table its sources read, no row fetched. A missing
# table fails the statement ("no such table" / ORA-00942), which reference.reference_app_present reads
# as absent.
PRESENT = Sql.both("SELECT 1 FROM TASK t, TASK_COMMENT c, SPRINT s, PROJECT p, EMPLOYEE e WHERE 1 = 0")
