"""Run the repository's SQL*Plus files through python-oracledb, the way SQL*Plus would.

The Oracle suite provisions its database with the files a user runs
(``local/*.sql``, ``sql/oracle/load_model.sql``, the SQL inside
``local/init/01_users.sh``) instead of re-typing their statements, so a
broken file breaks the suite. There is no ``sqlplus`` binary here, so this
module reads the subset of SQL*Plus the files use:

* SQL*Plus commands, one per line, outside a statement: ``SET`` (``DEFINE
  ON|OFF``, ``SERVEROUTPUT ON|OFF``; the display settings are ignored),
  ``WHENEVER SQLERROR|OSERROR ...``, ``DEFINE name = value``, ``PROMPT``,
  ``EXIT``/``QUIT`` (the rest of the file is not run). ``CONNECT`` and
  ``@file`` are refused: the caller chooses the connection.
* ``--`` and ``REM`` comment lines between statements.
* A SQL statement ends with ``;`` at the end of a line or a ``/`` line; a
  PL/SQL unit (DECLARE, BEGIN, CREATE PROCEDURE...) ends with a ``/`` line
  and keeps its semicolons (``oracle_rag.sql_scripts.is_plsql``).
* Substitution variables ``&name`` / ``&&name`` are replaced by DEFINEd values
  while ``SET DEFINE`` is on (SQL*Plus's default); an undefined one is an
  error (SQL*Plus would prompt for it).

Execution stops at the first error, which is raised: every file declares
``WHENEVER SQLERROR EXIT FAILURE``, and :func:`parse` refuses one that does
not. Like SQL*Plus's ``EXIT`` (COMMIT by default), the runner commits at the
end. With ``SERVEROUTPUT ON`` the DBMS_OUTPUT lines are collected.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oracle_rag.sql_scripts import is_plsql

_SUBST = re.compile(r"&&?([A-Za-z_]\w*)")
_HEREDOC = re.compile(r"^\s*sqlplus\s+(?P<args>[^<\n]*)<<\s*(?P<tag>\w+)\s*$", re.MULTILINE)
_SHELL_VAR = re.compile(r"\$\{(\w+)(?:[:?\-][^}]*)?\}")


@dataclass
class Script:
    """What a file asks SQL*Plus to do: its statements (substituted) and its settings."""

    statements: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    exit_on_sqlerror: bool = False
    serveroutput: bool = False


@dataclass
class Outcome:
    statements: int
    output: list[str]


def _command(line: str) -> tuple[str, str]:
    word, _, rest = line.strip().partition(" ")
    return word.upper().rstrip(";"), rest.strip().rstrip(";").strip()


def _define(rest: str) -> tuple[str, str]:
    name, _, value = rest.partition("=")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return name.strip().lower(), value


def parse(text: str, defines: dict[str, str] | None = None) -> Script:
    """The statements of a SQL*Plus script, with ``defines`` (plus the file's own DEFINEs) substituted."""
    script = Script(defines={k.lower(): v for k, v in (defines or {}).items()})
    substitute = True
    current: list[str] = []
    plsql = False

    def finish() -> None:
        nonlocal current, plsql
        body = "\n".join(current).strip()
        if plsql:
            body = body.rstrip()
        elif body.endswith(";"):
            body = body[:-1].rstrip()
        if body:
            script.statements.append(_substitute(body, script.defines) if substitute else body)
        current, plsql = [], False

    for line in text.splitlines():
        stripped = line.strip()
        if not current:
            if not stripped or stripped.startswith("--") or stripped.upper().startswith("REM "):
                continue
            word, rest = _command(stripped)
            if word == "SET":
                setting, _, value = rest.partition(" ")
                if setting.upper() == "DEFINE":
                    substitute = value.strip().upper() != "OFF"
                elif setting.upper() == "SERVEROUTPUT":
                    script.serveroutput = value.strip().upper().startswith("ON")
                continue
            if word == "WHENEVER":
                if rest.upper().startswith("SQLERROR EXIT"):
                    script.exit_on_sqlerror = True
                continue
            if word in ("DEFINE", "DEF"):
                name, value = _define(rest)
                script.defines[name] = value
                continue
            if word in ("PROMPT", "SPOOL"):
                continue
            if word in ("EXIT", "QUIT"):
                break
            if word in ("CONNECT", "CONN") or stripped.startswith("@"):
                raise ValueError(f"SQL*Plus command not supported here: {stripped.split()[0]}")
            if stripped == "/":
                continue
            plsql = is_plsql(stripped)
        if stripped == "/":
            finish()
            continue
        current.append(line)
        if not plsql and stripped.endswith(";"):
            finish()
    if current:
        raise ValueError("the script ends inside a statement (missing ';' or '/')")
    return script


def _substitute(sql: str, defines: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1).lower()
        if name not in defines:
            raise ValueError(f"substitution variable &{name} is not defined (SQL*Plus would prompt)")
        return defines[name]

    return _SUBST.sub(value, sql)


def heredoc_sql(shell_script: str, env: dict[str, str]) -> tuple[list[str], str]:
    """The ``sqlplus ARGS <<TAG ... TAG`` here-document of a shell script, as the shell expands it.

    Returns sqlplus's arguments and the SQL text with ``${VAR}`` (and
    ``${VAR^^}``-free forms) replaced from ``env``; the script's own shell
    checks are not run, so callers pass values those checks accept.
    """
    match = _HEREDOC.search(shell_script)
    if match is None:
        raise ValueError("no `sqlplus ... <<TAG` here-document in the script")
    tag = match.group("tag")
    start = match.end() + 1
    end = shell_script.index(f"\n{tag}\n", start)
    body = shell_script[start:end]

    def expand(m: re.Match[str]) -> str:
        if m.group(1) not in env:
            raise ValueError(f"${{{m.group(1)}}} is not set")
        return env[m.group(1)]

    return shlex.split(match.group("args")), _SHELL_VAR.sub(expand, body)


def run(connection: Any, text: str, defines: dict[str, str] | None = None) -> Outcome:
    """Run a SQL*Plus script on a python-oracledb connection; raise at the first error."""
    script = parse(text, defines)
    if not script.exit_on_sqlerror:
        raise ValueError(
            "the script does not say WHENEVER SQLERROR EXIT: SQL*Plus would go on after an error"
        )
    output: list[str] = []
    with connection.cursor() as cursor:
        if script.serveroutput:
            cursor.callproc("DBMS_OUTPUT.ENABLE", [None])
        for sql in script.statements:
            cursor.execute(sql)
            if script.serveroutput:
                output.extend(_dbms_output(cursor))
    connection.commit()  # SQL*Plus's EXIT commits by default
    return Outcome(len(script.statements), output)


def run_file(connection: Any, path: Path, defines: dict[str, str] | None = None) -> Outcome:
    return run(connection, Path(path).read_text("utf-8"), defines)


def _dbms_output(cursor: Any) -> list[str]:
    import oracledb

    line = cursor.var(oracledb.DB_TYPE_VARCHAR, 32767)
    status = cursor.var(oracledb.DB_TYPE_NUMBER)
    lines = []
    while True:
        cursor.callproc("DBMS_OUTPUT.GET_LINE", (line, status))
        if status.getvalue() != 0:
            return lines
        lines.append(str(line.getvalue() or ""))
