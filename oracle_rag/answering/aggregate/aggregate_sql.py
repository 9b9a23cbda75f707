"""Statements the guarded executors send around the untrusted query (each runs on one engine).

The executors run them on their own DBAPI connections (``.oracle`` /
``.sqlite``); the two ``SQLITE_SEAL_*`` templates are formatted with quoted
identifiers and the views' own stored definitions, never with a query.
"""

from oracle_rag.engines.statements import Sql

SET_READ_ONLY = Sql(oracle="SET TRANSACTION READ ONLY")

QUERY_ONLY = Sql(sqlite="PRAGMA query_only = 1")

VIEW_DEFINITIONS = Sql(sqlite="SELECT name, sql FROM sqlite_schema WHERE type = 'view'")

# Every name a zero-column read could count rows of: tables, views, the
# schema tables themselves, eponymous virtual tables (sqlite_dbpage,
# json_each, ...) and every pragma_* table-valued function.
KNOWN_OBJECTS = Sql(
    sqlite="""SELECT name FROM sqlite_schema
UNION SELECT name FROM sqlite_temp_schema
UNION SELECT name FROM pragma_module_list
UNION SELECT 'pragma_' || name FROM pragma_pragma_list
UNION VALUES ('sqlite_schema'), ('sqlite_master'), ('sqlite_temp_schema'), ('sqlite_temp_master')"""
)

# The sealed copy of an allowed view (sqlite_executor._seal). {sealed} and
# {view} are quoted by sqlite_executor.quote_identifier; {columns} and
# {select} come from the view's own stored definition, never from a query.
SQLITE_SEAL_BODY = "CREATE TEMP VIEW {sealed}{columns} AS SELECT * FROM ({select}) LIMIT -1 OFFSET 0"
SQLITE_SEAL_NAME = "CREATE TEMP VIEW {view} AS SELECT * FROM {sealed}"

# Oracle: the caller of one guarded query, written by the product's own
# session under an unguessable token that the read-only session carries as
# CLIENT_IDENTIFIER (V12, engines/guarded_scope_sql.py), deleted after the
# query with any row a crashed process left (older than a day).
INSERT_GUARDED_CALLER = Sql(
    oracle="INSERT INTO RAG_GUARDED_CALLER (TOKEN, CALLER_ID, SEE_ALL) VALUES (:token, :caller_id, :see_all)"
)
INSERT_GUARDED_GROUP = Sql(
    oracle="INSERT INTO RAG_GUARDED_GROUP (TOKEN, PRINCIPAL) VALUES (:token, :principal)"
)
DELETE_GUARDED_CALLER = Sql(
    oracle="DELETE FROM RAG_GUARDED_CALLER "
    "WHERE TOKEN = :token OR CREATED_AT < SYSTIMESTAMP - INTERVAL '1' DAY"
)
