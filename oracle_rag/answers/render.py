"""A structured result as answer text and as the JSON fields clients show.

The text puts the number first: the total (or the count, or the one line per
group), then the records (anchor, title, status, the matching part of the
text), then what was applied. English or Spanish after the question.
"""

from __future__ import annotations

from typing import Any

from .service import Record, StructuredResult
from .understanding import Condition
from .vocabulary import Vocabulary

NOT_VISIBLE = {
    "en": "No {what} with that id is visible to you: it does not exist, or you may not see it.",
    "es": "No hay ningún registro con ese id visible para usted: no existe o no puede verlo.",
}
PLURAL = {"TASK": ("task", "tasks", "tarea", "tareas"), "SPRINT": ("sprint", "sprints", "sprint", "sprints"),
          "PROJECT": ("project", "projects", "proyecto", "proyectos")}


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


def noun(source_type: str | None, n: int, lang: str) -> str:
    forms = PLURAL.get(source_type or "", ("record", "records", "registro", "registros"))
    if source_type and source_type not in PLURAL:
        forms = (source_type.lower(), source_type.lower(), source_type.lower(), source_type.lower())
    return forms[(0 if n == 1 else 1) + (2 if lang == "es" else 0)]


def value_text(vocab: Vocabulary, facet: str, value: Any, caller_id: int | None, lang: str = "en") -> str:
    declared = vocab.facets.get(facet)
    if declared is not None and declared.person and value is None:
        return "sin asignar" if lang == "es" else "unassigned"
    if declared is not None and declared.person and caller_id is not None and value == caller_id:
        return "usted" if lang == "es" else "you"
    return vocab.label(facet, value)


def chips(conditions: list[Condition], vocab: Vocabulary, caller_id: int | None,
          lang: str = "en") -> list[dict[str, Any]]:
    """One chip per condition key: what was applied, in words, removable by its key."""
    out: list[dict[str, Any]] = []
    for key in dict.fromkeys(c.key for c in conditions):
        group = [c for c in conditions if c.key == key]
        out.append({"key": key, "label": _chip_label(group, vocab, caller_id, lang),
                    "conditions": [_condition_dict(c, vocab, caller_id) for c in group]})
    return out


def _condition_dict(c: Condition, vocab: Vocabulary, caller_id: int | None) -> dict[str, Any]:
    facet = vocab.facets[c.facet]
    return {"facet": c.facet, "label": facet.label, "op": c.op, "values": list(c.values),
            "display": [value_text(vocab, c.facet, v, caller_id) for v in c.values], "text": c.text}


def _chip_label(group: list[Condition], vocab: Vocabulary, caller_id: int | None, lang: str) -> str:
    if group[0].key == "overdue":
        return "vencidas" if lang == "es" else "overdue"
    return (" y " if lang == "es" else " and ").join(describe_condition(c, vocab, caller_id, lang) for c in group)


_WORDS = {"en": ("not", "none", "any", "before", "to", "from"), "es": ("no", "ninguno", "cualquiera", "antes del",
                                                                       "a", "desde")}


def describe_condition(c: Condition, vocab: Vocabulary, caller_id: int | None, lang: str = "en") -> str:
    label = vocab.facets[c.facet].label_in(lang)
    shown = ", ".join(value_text(vocab, c.facet, v, caller_id, lang) for v in c.values)
    not_, none, any_, before, to, from_ = _WORDS["es" if lang == "es" else "en"]
    if c.op == "in":
        return f"{label}: {shown}"
    if c.op == "not_in":
        return f"{label}: {not_} {shown}"
    if c.op == "null":
        return f"{label}: {none}"
    if c.op == "not_null":
        return f"{label}: {any_}"
    if c.op == "lt":
        return f"{label} {before} {c.values[0]}"
    if c.values[1] == "9999-12-31":
        return f"{label} {from_} {c.values[0]}"
    return f"{label} {c.values[0]} {to} {c.values[1]}"


def describe(conditions: list[Condition], vocab: Vocabulary, caller_id: int | None, lang: str = "en") -> str:
    return " \u00b7 ".join(c["label"] for c in chips(conditions, vocab, caller_id, lang))


def columns(result: StructuredResult) -> list[tuple[str, str]]:
    """(facet name, label) of the facets a list shows per record: enums, people, due dates."""
    vocab = result.vocab
    types = {r.source_type for r in result.records} or {result.understanding.target_type or ""}
    out: list[tuple[str, str]] = []
    for t in types:
        for f in vocab.facets_of(t):
            if (f.kind == "enum" and f.display) or f.person or f.due:
                if (f.name, f.label) not in out:
                    out.append((f.name, f.label))
    if not out:
        out = [(f.name, f.label) for t in types for f in vocab.facets_of(t) if f.kind == "enum"]
    return out


def record_values(record: Record, result: StructuredResult, caller_id: int | None) -> dict[str, str]:
    out = {}
    for name, label in columns(result):
        if name in record.facets:
            value = record.facets[name]
            shown = value_text(result.vocab, name, value, None)
            out[label] = "-" if shown == "none" else shown
    return out


def _record_line(i: int, record: Record, result: StructuredResult, caller_id: int | None) -> list[str]:
    values = [v if label != "due" else f"due {v}" for label, v in record_values(record, result, caller_id).items()
              if v != "-"]
    head = f"{i}. {record.anchor} {record.title}"
    if values:
        head += " \u2014 " + " \u00b7 ".join(values)
    lines = [head]
    if record.passage:
        lines.append("   " + one_line(record.passage.replace("\n", " / "), 220))
    return lines


def render_text(result: StructuredResult, caller_id: int | None) -> str:
    u = result.understanding
    vocab = result.vocab
    lang = u.language
    if u.kind == "notice":
        notes = []
        for n in u.notices:
            message = n.message(vocab.facets[n.facet].label_in(lang), lang)
            notes.append(message[0].upper() + message[1:] + ".")
        notes.append("Nothing was filtered by it: ask again with a known name." if lang == "en" else
                     "No se ha filtrado por ello: pregunte de nuevo con un nombre conocido.")
        return "\n".join(notes)
    if u.kind == "lookup":
        return _lookup_text(result)
    desc = describe(u.conditions, vocab, caller_id, lang)
    kind = u.target_type
    total = result.total or 0
    plural = noun(kind, total, lang)
    lines: list[str] = []
    if u.kind == "count":
        lines.extend(_count_lines(result, desc, caller_id))
    elif total == 0:
        lines.append(f"No {noun(kind, 2, lang)} you may see match {desc}." if lang == "en" else
                     f"Ninguna {noun(kind, 1, lang)} visible para usted coincide con {desc}.")
    else:
        shown = len(result.records)
        if lang == "es":
            first = f"{total} {plural} coinciden con {desc}" if total != 1 else f"1 {plural} coincide con {desc}"
        else:
            first = f"{total} {plural} match {desc}" if total != 1 else f"1 {plural} matches {desc}"
        if shown < total:
            how = f"by relevance to \u201c{result.ranked_by}\u201d" if result.ranked_by else "in id order"
            first += f"; the first {shown} {how}:" if lang == "en" else f"; las primeras {shown}:"
        else:
            first += ":" if shown else "."
        lines.append(first)
    if result.records and u.kind in ("list", "count"):
        if u.kind == "count":
            lines.append("")
            lines.append(f"Most relevant to \u201c{result.ranked_by or u.topic}\u201d:")
        else:
            lines.append("")
        for i, r in enumerate(result.records, 1):
            lines.extend(_record_line(i, r, result, caller_id))
    if u.conditions:
        lines.append("")
        lines.append(("Applied: " if lang == "en" else "Aplicado: ") + desc +
                     (" (within what you may see)." if lang == "en" else " (dentro de lo que puede ver)."))
    return "\n".join(lines)


def _count_lines(result: StructuredResult, desc: str, caller_id: int | None) -> list[str]:
    u = result.understanding
    vocab = result.vocab
    total = result.total or 0
    lang = u.language
    plural = noun(u.target_type, total, lang)
    match = (f" matching {desc}" if lang == "en" else f" con {desc}") if desc else ""
    if not u.group_by:
        return [f"{total} {plural}{match}." if lang == "en" else f"{total} {plural}{match}."]
    label = vocab.facets[u.group_by].label_in(lang)
    names = [(value_text(vocab, u.group_by, v, None, lang), n) for v, n in result.groups]
    lines = []
    if u.superlative and names:
        best_n = names[0][1]
        tied = [name for name, n in names if n == best_n]
        word = "most" if u.superlative == "most" else "fewest"
        lines.append(f"{' and '.join(tied)} {'have' if len(tied) > 1 else 'has'} the {word} {noun(u.target_type, 2, lang)}"
                     f"{match}: {best_n}." if lang == "en" else
                     f"{' y '.join(tied)}: {best_n} {noun(u.target_type, best_n, lang)}{match}.")
    else:
        lines.append(f"{total} {plural}{match}, per {label}:" if lang == "en" else
                     f"{total} {plural}{match}, por {label}:")
    for name, n in names:
        lines.append(f"{name}: {n}")
    if not names:
        lines.append("(none)" if lang == "en" else "(ninguna)")
    return lines


def _lookup_text(result: StructuredResult) -> str:
    u = result.understanding
    lines: list[str] = []
    for record in result.records:
        if lines:
            lines.append("")
        body = [line for line in record.content.strip().split("\n") if line.strip()]
        lines.append(body[0] if body[0].startswith(record.anchor) else f"{record.anchor} {body[0]}")
        rest = body[1:]
        if record.passage:
            head = [line for line in rest[:2] if line not in record.passage]
            lines.extend(head)
            lines.extend(record.passage.split("\n"))
        else:
            lines.extend(rest[:12])
            if len(rest) > 12:
                lines.append("\u2026")
    if result.missing_lookups:
        what = noun(u.lookups[0][0] if len({t for t, _ in u.lookups}) == 1 else None, 1, "en")
        message = NOT_VISIBLE["es" if u.language == "es" else "en"].format(what=what)
        if result.records:
            lines.append("")
            message = (f"{result.missing_lookups} of the records you named: " if u.language == "en" else
                       f"{result.missing_lookups} de los registros: ") + message[0].lower() + message[1:]
        lines.append(message)
    return "\n".join(lines)


def structured_dict(result: StructuredResult, caller_id: int | None) -> dict[str, Any]:
    """The JSON fields for what was understood and computed."""
    u = result.understanding
    vocab = result.vocab
    cols = columns(result) if result.records else []
    group = None
    if u.group_by:
        group = {"facet": u.group_by, "label": vocab.facets[u.group_by].label,
                 "rows": [{"value": v, "label": value_text(vocab, u.group_by, v, None, u.language), "count": n}
                          for v, n in result.groups]}
    return {
        "kind": u.kind,
        "type": u.target_type,
        "language": u.language,
        "filters": chips(u.conditions, vocab, caller_id, u.language),
        "dropped": list(u.dropped),
        "notices": [n.to_dict(vocab.facets[n.facet].label_in(u.language), u.language) for n in u.notices],
        "topic": u.topic or None,
        "total": result.total,
        "count": result.total if u.kind == "count" else None,
        "groups": group,
        "columns": [label for _, label in cols],
        "records": [{"anchor": r.anchor, "source_type": r.source_type, "source_id": r.source_id, "title": r.title,
                     "values": record_values(r, result, caller_id)} for r in result.records],
    }
