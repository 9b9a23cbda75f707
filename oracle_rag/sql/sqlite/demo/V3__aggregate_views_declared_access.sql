-- The aggregate views follow the declared access policy (issue 23), as every
-- other read path does: a task, sprint or project row is visible when the
-- caller sees all (see_all_roles) or when its record passes the one scope
-- predicate (the source's declared owner/group/public rules, RAG_CHUNK_ACL,
-- failed permission data) with the caller's id, see-all and groups read from
-- the guarded connection. The RAG_RECORD_VISIBLE and RAG_CALLER_KNOWN placeholders
-- are filled at migrate time from engine_sql.scope_predicate
-- (engines/guarded_scope_sql.py). EMPLOYEE is no declared source: every
-- authenticated caller reads it, as before. Replaces V2's fixed rule (the
-- literal EMPLOYEE.ROLE manager/admin, else the assignee).

DROP VIEW IF EXISTS RAG_V_TASK;

CREATE VIEW RAG_V_TASK AS
SELECT t.TASK_ID, t.TITLE, t.STATUS, t.PRIORITY, t.SPRINT_ID, t.PROJECT_ID, t.ASSIGNEE_ID,
       t.STORY_POINTS, t.ESTIMATED_HOURS, t.DUE_DATE
FROM TASK t
WHERE {{RAG_RECORD_VISIBLE:TASK:t.TASK_ID}};

DROP VIEW IF EXISTS RAG_V_SPRINT;

CREATE VIEW RAG_V_SPRINT AS
SELECT s.SPRINT_ID, s.PROJECT_ID, s.NAME, s.STATUS, s.START_DATE, s.END_DATE
FROM SPRINT s
WHERE {{RAG_RECORD_VISIBLE:SPRINT:s.SPRINT_ID}};

DROP VIEW IF EXISTS RAG_V_PROJECT;

CREATE VIEW RAG_V_PROJECT AS
SELECT p.PROJECT_ID, p.NAME, p.STATUS, p.START_DATE, p.END_DATE
FROM PROJECT p
WHERE {{RAG_RECORD_VISIBLE:PROJECT:p.PROJECT_ID}};

DROP VIEW IF EXISTS RAG_V_EMPLOYEE;

CREATE VIEW RAG_V_EMPLOYEE AS
SELECT e.EMPLOYEE_ID, e.FIRST_NAME, e.LAST_NAME, e.ROLE
FROM EMPLOYEE e
WHERE {{RAG_CALLER_KNOWN}};
