"""One lexer pass over untrusted SQL, with each engine's own rules.

Why a lexer of our own: a textual check that removes comments and blanks
string literals in two separate passes can be fooled (a string holding
``/*`` hides the text after it, a comment holding ``'`` does the reverse).
Strings, quoted identifiers and comments must be recognised together, in
the order the database reads them, and with the database's rules:

* SQLite (``tokenize.c``): ``'...'`` with ``''``; ``"..."`` and
  ```...``` identifiers with doubled quotes; ``[...]`` identifiers; ``--``
  to end of line; ``/* ... */`` or to the end of the text; ``x'..'`` blobs;
  ``?``, ``:name``, ``@name``, ``$name``, ``#name`` parameters; any byte
  >= 0x80 is an identifier character.
* Oracle: ``'...'`` with ``''``; ``N'...'``; alternative quoting
  ``q'[...]'`` / ``q'{...}'`` / ``q'<...>'`` / ``q'(...)'`` / ``q'!...!'``
  (and ``nq``); ``"..."`` identifiers (no escape); ``$`` and ``#`` inside
  identifiers (``V$SESSION``); ``--`` and ``/* */`` (unterminated is an
  error); ``:name`` binds; ``@`` (database links).

Anything the lexer cannot place is an error: the check refuses what it does
not understand rather than guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

WORD, QUOTED, STRING, NUMBER, PARAM, PUNCT, COMMENT, SPACE = (
    "word",
    "quoted",
    "string",
    "number",
    "param",
    "punct",
    "comment",
    "space",
)

_SPACE = " \t\n\r\f"
_OPERATORS = (
    "->>",
    "||",
    "<=",
    ">=",
    "<>",
    "!=",
    "==",
    "<<",
    ">>",
    "->",
    "=>",
    ":=",
    "(",
    ")",
    ",",
    ";",
    ".",
    "+",
    "-",
    "*",
    "/",
    "%",
    "=",
    "<",
    ">",
    "&",
    "|",
    "~",
)
_Q_CLOSE = {"[": "]", "{": "}", "<": ">", "(": ")"}


class LexError(ValueError):
    """The text cannot be split into tokens the way the database would."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int

    @property
    def upper(self) -> str:
        return self.text.upper()

    def identifier(self) -> str:
        """The identifier a WORD or QUOTED token names (quotes removed, escapes undone)."""
        if self.kind != QUOTED:
            return self.text
        opener, body = self.text[0], self.text[1:-1]
        if opener == "[":
            return body
        return body.replace(opener * 2, opener)


def _is_word_start(ch: str, dialect: str) -> bool:
    if ch.isascii():
        return ch.isalpha() or ch == "_"
    return dialect == "sqlite"  # Oracle: refused later as a non-ASCII character


def _is_word_char(ch: str, dialect: str) -> bool:
    if ch.isascii():
        return ch.isalnum() or ch in ("_", "$") or (ch == "#" and dialect == "oracle")
    return True


def _quoted_end(sql: str, i: int, close: str, *, doubled: bool, what: str) -> int:
    """Index just past the closing ``close`` of a literal opened before ``i``."""
    while True:
        j = sql.find(close, i)
        if j < 0:
            raise LexError(f"unterminated {what}")
        if doubled and sql.startswith(close * 2, j):
            i = j + 2
            continue
        return j + 1


def tokenize(sql: str, dialect: str) -> list[Token]:
    """Split ``sql`` into tokens following ``dialect`` ("sqlite" or "oracle")."""
    if dialect not in ("sqlite", "oracle"):
        raise ValueError(f"unknown dialect {dialect!r}")
    tokens: list[Token] = []
    n, i = len(sql), 0
    while i < n:
        ch, start = sql[i], i
        nxt = sql[i + 1] if i + 1 < n else ""
        if ch in _SPACE:
            while i < n and sql[i] in _SPACE:
                i += 1
            tokens.append(Token(SPACE, sql[start:i], start))
            continue
        if ch == "-" and nxt == "-":
            j = sql.find("\n", i)
            i = n if j < 0 else j
            tokens.append(Token(COMMENT, sql[start:i], start))
            continue
        if ch == "/" and nxt == "*":
            j = sql.find("*/", i + 2)
            if j < 0:
                if dialect == "oracle":
                    raise LexError("unterminated /* comment")
                i = n  # SQLite: a block comment may run to the end of the text
            else:
                i = j + 2
            tokens.append(Token(COMMENT, sql[start:i], start))
            continue
        if dialect == "oracle" and ch in "nNqQ":
            prefix = 2 if ch in "nN" and nxt in "qQ" else 1 if ch in "qQ" else 0
            if prefix and sql.startswith("'", i + prefix) and i + prefix + 1 < n:
                opener = sql[i + prefix + 1]
                if opener in _SPACE:
                    raise LexError("alternative quoting q'...' with a blank delimiter")
                close = _Q_CLOSE.get(opener, opener) + "'"
                i = _quoted_end(sql, i + prefix + 2, close, doubled=False, what="q'...' literal") + 1
                tokens.append(Token(STRING, sql[start:i], start))
                continue
            if ch in "nN" and nxt == "'":
                i = _quoted_end(sql, i + 2, "'", doubled=True, what="string literal")
                tokens.append(Token(STRING, sql[start:i], start))
                continue
        if dialect == "sqlite" and ch in "xX" and nxt == "'":
            i = _quoted_end(sql, i + 2, "'", doubled=False, what="blob literal")
            tokens.append(Token(STRING, sql[start:i], start))
            continue
        if ch == "'":
            i = _quoted_end(sql, i + 1, "'", doubled=True, what="string literal")
            tokens.append(Token(STRING, sql[start:i], start))
            continue
        if ch == '"' or (dialect == "sqlite" and ch in "`["):
            close = "]" if ch == "[" else ch
            doubled = dialect == "sqlite" and ch != "["
            i = _quoted_end(sql, i + 1, close, doubled=doubled, what="quoted identifier")
            tokens.append(Token(QUOTED, sql[start:i], start))
            continue
        if ch.isascii() and ch.isdigit() or (ch == "." and nxt.isascii() and nxt.isdigit()):
            i = _number_end(sql, i)
            tokens.append(Token(NUMBER, sql[start:i], start))
            continue
        if _is_word_start(ch, dialect):
            i += 1
            while i < n and _is_word_char(sql[i], dialect):
                i += 1
            tokens.append(Token(WORD, sql[start:i], start))
            continue
        if (
            ch == "?"
            or ch in ":@$#"
            and (dialect == "sqlite" or ch == ":")
            and nxt
            and _is_word_char(nxt, dialect)
        ):
            i += 1
            while i < n and _is_word_char(sql[i], dialect):
                i += 1
            tokens.append(Token(PARAM, sql[start:i], start))
            continue
        if ch == "@" and dialect == "oracle":
            tokens.append(Token(PUNCT, "@", start))
            i += 1
            continue
        op = next((o for o in _OPERATORS if sql.startswith(o, i)), None)
        if op is None:
            raise LexError(f"character {ch!r} at offset {i} is not SQL")
        tokens.append(Token(PUNCT, op, start))
        i += len(op)
    return tokens


def _number_end(sql: str, i: int) -> int:
    n = len(sql)
    if sql.startswith(("0x", "0X"), i):
        i += 2
        while i < n and (sql[i] in "0123456789abcdefABCDEF_"):
            i += 1
        return i
    while i < n and (sql[i].isascii() and sql[i].isdigit() or sql[i] in "._"):
        i += 1
    if i < n and sql[i] in "eE":
        j = i + 1
        if j < n and sql[j] in "+-":
            j += 1
        if j < n and sql[j].isascii() and sql[j].isdigit():
            i = j
            while i < n and sql[i].isascii() and sql[i].isdigit():
                i += 1
    return i


def code_tokens(tokens: list[Token]) -> list[Token]:
    """The tokens the database treats as code (no comments, no blanks)."""
    return [t for t in tokens if t.kind not in (COMMENT, SPACE)]
