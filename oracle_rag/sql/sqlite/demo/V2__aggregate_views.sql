-- Views the aggregate (text-to-SQL) path may read, scoped to the caller
-- inside the database. rag_caller_id() exists only on the guarded,
-- read-only connection, where it returns the authenticated caller's id; the
-- model's SQL can neither see nor set it (the authorizer refuses a direct
-- call). Managers and admins count everything; developers count the tasks
-- assigned to them. Only non-sensitive columns are exposed.

CREATE VIEW RAG_V_TASK AS
SELECT t.TASK_ID, t.TITLE, t.STATUS, t.PRIORITY, t.SPRINT_ID, t.PROJECT_ID, t.ASSIGNEE_ID,
       t.STORY_POINTS, t.ESTIMATED_HOURS, t.DUE_DATE
FROM TASK t
WHERE EXISTS (
  SELECT 1 FROM EMPLOYEE e
  WHERE e.EMPLOYEE_ID = rag_caller_id()
    AND (e.ROLE IN ('manager', 'admin') OR t.ASSIGNEE_ID = e.EMPLOYEE_ID)
);

CREATE VIEW RAG_V_SPRINT AS
SELECT s.SPRINT_ID, s.PROJECT_ID, s.NAME, s.STATUS, s.START_DATE, s.END_DATE
FROM SPRINT s
WHERE EXISTS (SELECT 1 FROM EMPLOYEE e WHERE e.EMPLOYEE_ID = rag_caller_id());

CREATE VIEW RAG_V_PROJECT AS
SELECT p.PROJECT_ID, p.NAME, p.STATUS, p.START_DATE, p.END_DATE
FROM PROJECT p
WHERE EXISTS (SELECT 1 FROM EMPLOYEE e WHERE e.EMPLOYEE_ID = rag_caller_id());

CREATE VIEW RAG_V_EMPLOYEE AS
SELECT e.EMPLOYEE_ID, e.FIRST_NAME, e.LAST_NAME, e.ROLE
FROM EMPLOYEE e
WHERE EXISTS (SELECT 1 FROM EMPLOYEE me WHERE me.EMPLOYEE_ID = rag_caller_id());
