"""Statements the guarded executors send around the untrusted query."""

ORACLE_SET_READ_ONLY = "SET TRANSACTION READ ONLY"

ORACLE_STATEMENTS = {"SET_READ_ONLY": ORACLE_SET_READ_ONLY}

SQLITE_QUERY_ONLY = "PRAGMA query_only = 1"

SQLITE_OBJECT_NAMES = "SELECT name FROM sqlite_schema"

SQLITE_VIEW_DEFINITIONS = "SELECT name, sql FROM sqlite_schema WHERE type = 'view'"

# Every name a zero-column read could count rows of: tables, views, the
# schema tables themselves, eponymous virtual tables (sqlite_dbpage,
# json_each, ...) and every pragma_* table-valued function.
SQLITE_KNOWN_OBJECTS = """SELECT name FROM sqlite_schema
UNION SELECT name FROM sqlite_temp_schema
UNION SELECT name FROM pragma_module_list
UNION SELECT 'pragma_' || name FROM pragma_pragma_list
UNION VALUES ('sqlite_schema'), ('sqlite_master'), ('sqlite_temp_schema'), ('sqlite_temp_master')"""

# The sealed copy of an allowed view (sqlite_executor._seal). {sealed} and
# {view} are quoted by sqlite_executor.quote_identifier; {columns} and
# {select} come from the view's own stored definition, never from a query.
SQLITE_SEAL_BODY = "CREATE TEMP VIEW {sealed}{columns} AS SELECT * FROM ({select}) LIMIT -1 OFFSET 0"
SQLITE_SEAL_NAME = "CREATE TEMP VIEW {view} AS SELECT * FROM {sealed}"

SQLITE_STATEMENTS = {"QUERY_ONLY": SQLITE_QUERY_ONLY, "OBJECT_NAMES": SQLITE_OBJECT_NAMES,
                     "VIEW_DEFINITIONS": SQLITE_VIEW_DEFINITIONS, "KNOWN_OBJECTS": SQLITE_KNOWN_OBJECTS,
                     "SEAL_BODY": SQLITE_SEAL_BODY, "SEAL_NAME": SQLITE_SEAL_NAME}
