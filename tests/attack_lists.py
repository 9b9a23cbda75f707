"""The attack lists run against the guarded SQL path (shared by several test files).

``SQLITE_ATTACKS`` is the issue-5 verification list; ``BYPASS_ATTACKS`` are
the known bypass classes (string literals holding comment markers,
decoy CTEs in unrelated subqueries, CTEs named like an allowed view,
SQLite's built-in and eponymous virtual tables, pragma functions, temp and
main qualifiers, zero-column reads, value-size blow-ups). Every entry must
be refused, with the text check and without it (the database alone).
``ORACLE_ATTACKS`` and ``ORACLE_BYPASS_ATTACKS`` must be refused by the text
check in the Oracle dialect.
"""

from __future__ import annotations

# (name, sql) — each must raise GuardrailError on the embedded engine.
SQLITE_ATTACKS = [
    ("two statements", "SELECT 1 FROM RAG_V_TASK; DELETE FROM TASK"),
    ("two statements, comment hides", "SELECT 1 FROM RAG_V_TASK /* x */; DROP TABLE TASK -- y"),
    ("insert", "INSERT INTO TASK (TASK_ID) VALUES (99999)"),
    ("update", "UPDATE TASK SET STATUS = 'DONE'"),
    ("delete", "DELETE FROM RAG_CHUNK"),
    ("drop", "DROP TABLE TASK"),
    ("create table", "CREATE TABLE X (A INT)"),
    ("create temp table as", "CREATE TEMP TABLE X AS SELECT * FROM TASK"),
    ("attach", "ATTACH DATABASE '/tmp/evil.db' AS evil"),
    ("detach", "DETACH DATABASE main"),
    ("pragma", "PRAGMA writable_schema = 1"),
    ("pragma table_info", "PRAGMA table_info(TASK)"),
    ("vacuum into", "VACUUM INTO '/tmp/copy.db'"),
    ("copy", "COPY TASK TO '/tmp/x.csv'"),
    ("install", "INSTALL httpfs"),
    ("load", "LOAD 'ext'"),
    ("set", "SET search_path = x"),
    ("load_extension", "SELECT load_extension('/tmp/evil.so')"),
    ("readfile", "SELECT readfile('/etc/passwd')"),
    ("writefile", "SELECT writefile('/tmp/x', 'y')"),
    ("fts3_tokenizer", "SELECT fts3_tokenizer('simple')"),
    ("unknown function", "SELECT sqlite_version()"),
    ("randomblob dos", "SELECT randomblob(1000000000)"),
    ("base table", "SELECT * FROM TASK"),
    ("rag chunk", "SELECT CONTENT FROM RAG_CHUNK"),
    ("fts shadow", "SELECT * FROM RAG_CHUNK_FTS"),
    ("auth tables", "SELECT * FROM RAG_API_TOKEN"),
    ("schema table", "SELECT sql FROM sqlite_schema"),
    ("schema-qualified", "SELECT * FROM main.RAG_V_TASK"),
    ("subquery to base table", "SELECT COUNT(*) FROM RAG_V_TASK WHERE TASK_ID IN (SELECT TASK_ID FROM TASK)"),
    ("cte shadowing a table", "WITH TASK AS (SELECT * FROM TASK) SELECT COUNT(*) FROM TASK"),
    ("caller function directly", "SELECT rag_caller_id() FROM RAG_V_TASK"),
    ("for update", "SELECT * FROM RAG_V_TASK FOR UPDATE"),
    ("select into", "SELECT * INTO X FROM RAG_V_TASK"),
    ("pl/sql block", "BEGIN DELETE FROM TASK; END;"),
    ("call", "CALL evil()"),
    ("fullwidth homoglyph", "ＳＥＬＥＣＴ 1 FROM RAG_V_TASK"),
    ("cyrillic homoglyph", "SELECT COUNT(*) FROM RAG_V_TАSK"),
    ("hint comment trick", "SELECT /*+*/ 1 FROM RAG_V_TASK; DELETE FROM TASK"),
    ("case trick", "dElEtE FROM TASK"),
    (
        "runaway recursive cte",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r",
    ),
    ("nul byte", "SELECT 1 FROM RAG_V_TASK\x00; DROP TABLE TASK"),
    ("empty", "   "),
    ("garbage", "SELEC * FRM"),
]

# Oracle-dialect attacks: refused by the guard before any database sees them.
ORACLE_ATTACKS = [
    ("plsql anonymous block", "BEGIN EXECUTE IMMEDIATE 'DROP TABLE TASK'; END;"),
    ("declare block", "DECLARE x NUMBER; BEGIN NULL; END;"),
    ("call procedure", "CALL DBMS_SESSION.SET_IDENTIFIER('1')"),
    ("dbms package function", "SELECT DBMS_RANDOM.VALUE FROM dual"),
    ("dbms_session in select", "SELECT DBMS_SESSION.SET_IDENTIFIER('1') FROM dual"),
    ("utl_file", "SELECT UTL_FILE.FOPEN('D', 'f', 'w') FROM dual"),
    ("utl_http", "SELECT UTL_HTTP.REQUEST('http://attacker') FROM dual"),
    ("autonomous-transaction function", "SELECT evil_autonomous_fn() FROM RAG_V_TASK"),
    ("schema function", "SELECT app.evil_fn(1) FROM RAG_V_TASK"),
    ("dblink", "SELECT * FROM RAG_V_TASK@remote_db"),
    ("for update", "SELECT * FROM RAG_V_TASK FOR UPDATE SKIP LOCKED"),
    ("merge", "MERGE INTO TASK t USING dual ON (1=1) WHEN MATCHED THEN UPDATE SET STATUS = 'X'"),
    ("set transaction", "SET TRANSACTION READ WRITE"),
    ("alter session", "ALTER SESSION SET CURRENT_SCHEMA = SYS"),
    ("lock table", "LOCK TABLE TASK IN EXCLUSIVE MODE"),
    ("sys views", "SELECT * FROM SYS.USER$"),
    ("all_users", "SELECT USERNAME FROM ALL_USERS"),
    ("vector aux table", 'SELECT * FROM "VECTOR$RAG_CHUNK_VEC_IX$1_IVF_FLAT_CENTROIDS"'),
    ("two statements", "SELECT 1 FROM dual; DROP TABLE TASK"),
    ("comment trick", "SELECT 1 FROM RAG_V_TASK --\n; DELETE FROM TASK"),
]

BYPASS_ATTACKS = [
    (
        "string holds /* */ markers",
        "SELECT '/*' AS a, (SELECT group_concat(TITLE, '|') FROM TASK) AS b, '*/' AS c "
        "FROM RAG_V_TASK LIMIT 1",
    ),
    (
        "string holds -- marker",
        "SELECT '--' AS a, (SELECT group_concat(DESCRIPTION) FROM TASK) FROM RAG_V_TASK",
    ),
    ("comment holds a quote", "SELECT 1 /* ' */, (SELECT COUNT(*) FROM TASK) /* ' */ FROM RAG_V_TASK"),
    (
        "quoted identifier holds a comment",
        'SELECT 1 AS "/*", (SELECT COUNT(*) FROM TASK) AS "*/" FROM RAG_V_TASK',
    ),
    (
        "decoy cte in another subquery",
        "SELECT (SELECT COUNT(*) FROM (WITH TASK AS (SELECT 1) SELECT * FROM TASK)), "
        "(SELECT group_concat(TITLE) FROM TASK) FROM RAG_V_TASK LIMIT 1",
    ),
    (
        "decoy cte for sqlite_dbpage",
        "SELECT (SELECT COUNT(*) FROM (WITH sqlite_dbpage AS (SELECT 1 AS data) "
        "SELECT * FROM sqlite_dbpage)), (SELECT group_concat(data) FROM sqlite_dbpage) FROM RAG_V_TASK LIMIT 1",
    ),
    (
        "decoy cte for sqlite_stmt",
        "SELECT (SELECT 1 FROM (WITH sqlite_stmt AS (SELECT 1 AS sql) "
        "SELECT * FROM sqlite_stmt)), (SELECT group_concat(sql) FROM sqlite_stmt)",
    ),
    (
        "decoy cte for the token table",
        "SELECT (SELECT 1 FROM (WITH RAG_API_TOKEN AS (SELECT 1) "
        "SELECT * FROM RAG_API_TOKEN)), (SELECT group_concat(TOKEN_HASH) FROM RAG_API_TOKEN)",
    ),
    (
        "cte named like an allowed view",
        "WITH RAG_V_TASK AS (SELECT TASK_ID, TITLE FROM TASK) SELECT * FROM RAG_V_TASK",
    ),
    (
        "cte spoofing the view's own predicate",
        "WITH RAG_V_TASK AS (SELECT t.TASK_ID, t.TITLE FROM TASK t "
        "WHERE NOT EXISTS (SELECT 1 FROM EMPLOYEE e WHERE e.EMPLOYEE_ID = rag_caller_id() AND t.ASSIGNEE_ID = 0)) "
        "SELECT COUNT(*) FROM RAG_V_TASK",
    ),
    (
        "nested cte named like a view",
        "WITH x AS (WITH RAG_V_EMPLOYEE AS (SELECT * FROM RAG_API_TOKEN) "
        "SELECT * FROM RAG_V_EMPLOYEE) SELECT * FROM x",
    ),
    ("subquery aliased as a view", "SELECT COUNT(*) FROM (SELECT * FROM TASK) AS RAG_V_TASK"),
    (
        "caller id through a cte named like a view",
        "WITH RAG_V_TASK AS (SELECT rag_caller_id() AS x) SELECT x FROM RAG_V_TASK",
    ),
    ("sqlite_dbpage", "SELECT pgno, data FROM sqlite_dbpage"),
    ("sqlite_stmt", "SELECT sql FROM sqlite_stmt"),
    ("sqlite_schema via quoted name", 'SELECT sql FROM "sqlite_master"'),
    ("sqlite_temp_schema", "SELECT sql FROM sqlite_temp_schema"),
    ("sqlite_sequence", "SELECT * FROM sqlite_sequence"),
    ("pragma table function", "SELECT * FROM pragma_table_info('TASK')"),
    ("pragma database list", "SELECT * FROM pragma_database_list"),
    ("json_each table function", "SELECT value FROM json_each('[1,2]')"),
    ("fts5 shadow table", "SELECT * FROM RAG_CHUNK_FTS_data"),
    ("fts5 table", "SELECT * FROM RAG_CHUNK_FTS WHERE RAG_CHUNK_FTS MATCH 'a'"),
    ("main-qualified view (unsealed)", "SELECT * FROM main.RAG_V_TASK"),
    ("temp-qualified base table", "SELECT * FROM temp.TASK"),
    ("bracket-quoted base table", "SELECT * FROM [TASK]"),
    ("backtick-quoted base table", "SELECT * FROM `RAG_MESSAGE`"),
    ("double-quoted base table", 'SELECT CONTENT FROM "RAG_MESSAGE"'),
    ("lower-case base table", "select title from task"),
    ("row count of a base table", "SELECT COUNT(*) FROM TASK"),
    ("row count through a join", "SELECT COUNT(*) FROM RAG_V_EMPLOYEE, RAG_API_TOKEN"),
    (
        "exists over a base table",
        "SELECT COUNT(*) FROM RAG_V_TASK WHERE EXISTS (SELECT 1 FROM RAG_CONVERSATION)",
    ),
    ("in table-name", "SELECT COUNT(*) FROM RAG_V_TASK WHERE TASK_ID IN TASK"),
    ("conversations", "SELECT * FROM RAG_CONVERSATION"),
    ("sql-source documents", "SELECT * FROM RAG_SQL_DOCUMENT"),
    (
        "doubling string cte",
        "WITH RECURSIVE r(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM r) "
        "SELECT length(s) FROM r LIMIT 1 OFFSET 40",
    ),
    (
        "doubling replace cte",
        "WITH RECURSIVE r(s, n) AS (SELECT 'ab', 0 UNION ALL SELECT replace(s, 'a', s), n + 1 "
        "FROM r WHERE n < 60) SELECT max(length(s)) FROM r",
    ),
    (
        "doubling group_concat",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
        "SELECT length(group_concat(printf('%.1000c', 'x'))) FROM r",
    ),
    ("vacuum into", "VACUUM INTO '/tmp/oracle-rag-copy.db'"),
    ("attach memory", "ATTACH ':memory:' AS m"),
    ("savepoint", "SAVEPOINT x"),
    ("explain", "EXPLAIN SELECT * FROM TASK"),
    ("explain query plan", "EXPLAIN QUERY PLAN SELECT * FROM RAG_V_TASK"),
    ("create temp view", "CREATE TEMP VIEW v AS SELECT * FROM TASK"),
    ("analyze", "ANALYZE"),
    ("parameter", "SELECT COUNT(*) FROM RAG_V_TASK WHERE TASK_ID = ?"),
    (
        "hex of a base column through a cte",
        "WITH a AS (SELECT TOKEN_HASH FROM RAG_API_TOKEN) SELECT * FROM a",
    ),
    ("union with a base table", "SELECT TITLE FROM RAG_V_TASK UNION ALL SELECT TITLE FROM TASK"),
    ("window over a base table", "SELECT TITLE, ROW_NUMBER() OVER () FROM TASK"),
    ("unknown function", "SELECT sqlite_source_id()"),
    ("printf", "SELECT printf('%s', TITLE) FROM RAG_V_TASK"),
    ("zeroblob", "SELECT zeroblob(2000000000)"),
    ("char function", "SELECT char(65)"),
    ("json function", "SELECT json_object('a', TITLE) FROM RAG_V_TASK"),
]

# Refused by the text check (depth limit); without it SQLite runs them, and
# what they return must equal what the equivalent query over the views returns.
TEXT_ONLY_ATTACKS = [
    (
        "deep nesting",
        "SELECT " + "(" * 400 + "1" + ")" * 400 + " FROM RAG_V_TASK",
        "SELECT 1 FROM RAG_V_TASK",
    ),
    (
        "deep subquery nesting",
        "SELECT * FROM " + "(SELECT * FROM " * 120 + "RAG_V_TASK" + ")" * 120,
        "SELECT * FROM RAG_V_TASK",
    ),
    (
        "deep case nesting",
        "SELECT " + "CASE WHEN 1 THEN " * 150 + "TITLE" + " END" * 150 + " FROM RAG_V_TASK",
        "SELECT TITLE FROM RAG_V_TASK",
    ),
]

ORACLE_BYPASS_ATTACKS = [
    (
        "string holds /* */ markers",
        "SELECT '/*' AS a, (SELECT COUNT(*) FROM ALL_USERS) AS b, '*/' AS c FROM dual",
    ),
    ("q-quote hides code", "SELECT q'[ ' ]' AS a, (SELECT COUNT(*) FROM ALL_USERS) AS b, ' ]' FROM dual"),
    ("q-quote braces", "SELECT q'{ -- }' AS a, (SELECT USERNAME FROM ALL_USERS WHERE ROWNUM = 1) FROM dual"),
    ("nq-quote", "SELECT nq'! /* !' AS a, (SELECT COUNT(*) FROM ALL_VIEWS) FROM dual"),
    (
        "decoy cte",
        "SELECT (SELECT COUNT(*) FROM (WITH ALL_USERS AS (SELECT 1 AS X FROM dual) "
        "SELECT * FROM ALL_USERS)), (SELECT COUNT(*) FROM ALL_USERS) FROM dual",
    ),
    (
        "quoted cte name differs in case",
        'WITH "all_users" AS (SELECT 1 AS X FROM dual) SELECT * FROM all_users',
    ),
    ("all_users", "SELECT USERNAME FROM ALL_USERS"),
    ("all_views", "SELECT VIEW_NAME, TEXT FROM ALL_VIEWS"),
    ("all_db_links", "SELECT * FROM ALL_DB_LINKS"),
    ("session_privs", "SELECT * FROM SESSION_PRIVS"),
    ("session_roles", "SELECT * FROM SESSION_ROLES"),
    ("user_tab_privs", "SELECT * FROM USER_TAB_PRIVS"),
    ("dba_users", "SELECT * FROM DBA_USERS"),
    ("v$session", "SELECT * FROM V$SESSION"),
    ("gv$ quoted", 'SELECT * FROM "GV$SESSION"'),
    ("dictionary", "SELECT * FROM DICTIONARY"),
    ("base table granted", "SELECT * FROM TASK"),
    ("schema-qualified base table", "SELECT * FROM APP.TASK"),
    ("sys_context", "SELECT SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA') FROM dual"),
    ("table collection expression", "SELECT * FROM TABLE(DBMS_XPLAN.DISPLAY)"),
    ("json_table", "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a NUMBER PATH '$'))"),
    ("xmltable", "SELECT * FROM XMLTABLE('/a' PASSING XMLTYPE('<a/>'))"),
    ("flashback", "SELECT * FROM RAG_V_TASK AS OF TIMESTAMP SYSDATE - 1"),
    ("deep nesting", "SELECT " + "(" * 400 + "1" + ")" * 400 + " FROM dual"),
    ("bind variable", "SELECT COUNT(*) FROM RAG_V_TASK WHERE TASK_ID = :x"),
    ("unterminated comment", "SELECT 1 FROM RAG_V_TASK /* DELETE FROM TASK"),
    ("union with dictionary", "SELECT TITLE FROM RAG_V_TASK UNION ALL SELECT USERNAME FROM ALL_USERS"),
]
