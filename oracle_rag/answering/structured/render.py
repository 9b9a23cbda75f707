"""A structured result as answer text and as the JSON fields clients show.

The text puts the number first: the total (or the count, or the one line per
group), then the records (anchor, title, status, the matching part of the
text), then what was applied. English or Spanish after the question.
"""

from __future__ import annotations

from typing import Any

from oracle_rag.answering.structured import relevance
from oracle_rag.answering.structured.catalog import NONE_NOUN_NUMBER, say
from oracle_rag.answering.structured.dates import OPEN_END, OPEN_START
from oracle_rag.answering.structured.service import Record, StructuredResult
from oracle_rag.answering.structured.targets import describe_types
from oracle_rag.answering.structured.understood import AnswerKind, Condition
from oracle_rag.answering.structured.vocabulary import Vocabulary


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


def noun(vocab: Vocabulary, source_type: str | None, n: int, lang: str) -> str:
    """How answers name ``n`` records of a type: its declared nouns ("task"/"tareas"), else "records"."""
    m = vocab.meanings.get(source_type or "")
    if m is None or not m.nouns:
        if source_type:
            return source_type.lower()
        return say(lang, "record_one" if n == 1 else "record_many")
    return m.noun(n, lang)


def value_text(vocab: Vocabulary, facet: str, value: Any, caller_id: int | None, lang: str = "en") -> str:
    declared = vocab.facets.get(facet)
    if declared is not None and declared.person and value is None:
        return say(lang, "unassigned")
    if declared is not None and declared.person and caller_id is not None and value == caller_id:
        return say(lang, "you")
    return vocab.label(facet, value)


def chips(
    conditions: list[Condition], vocab: Vocabulary, caller_id: int | None, lang: str = "en"
) -> list[dict[str, Any]]:
    """One chip per condition key: what was applied, in words, removable by its key."""
    out: list[dict[str, Any]] = []
    for key in dict.fromkeys(c.key for c in conditions):
        group = [c for c in conditions if c.key == key]
        out.append(
            {
                "key": key,
                "label": _chip_label(group, vocab, caller_id, lang),
                "conditions": [_condition_dict(c, vocab, caller_id) for c in group],
            }
        )
    return out


def _condition_dict(c: Condition, vocab: Vocabulary, caller_id: int | None) -> dict[str, Any]:
    facet = vocab.facets[c.facet]
    return {
        "facet": c.facet,
        "label": facet.label,
        "op": c.op,
        "values": list(c.values),
        "display": [value_text(vocab, c.facet, v, caller_id) for v in c.values],
        "text": c.text,
    }


def _chip_label(group: list[Condition], vocab: Vocabulary, caller_id: int | None, lang: str) -> str:
    if group[0].key == "overdue":
        return say(lang, "overdue_chip")
    return say(lang, "and").join(describe_condition(c, vocab, caller_id, lang) for c in group)


_SIGNS = {"lt": "<", "gt": ">", "le": "\u2264", "ge": "\u2265"}


def describe_condition(c: Condition, vocab: Vocabulary, caller_id: int | None, lang: str = "en") -> str:
    label = vocab.facets[c.facet].label_in(lang)
    shown = ", ".join(value_text(vocab, c.facet, v, caller_id, lang) for v in c.values)
    if c.op == "in":
        return f"{label}: {shown}"
    if c.op == "not_in":
        return f"{label}: {say(lang, 'op_not')} {shown}"
    if c.op == "null":
        return f"{label}: {say(lang, 'op_none')}"
    if c.op == "not_null":
        return f"{label}: {say(lang, 'op_any')}"
    if vocab.facets[c.facet].kind == "number" and c.op != "in":
        shown_n = [f"{v:g}" if isinstance(v, float) else str(v) for v in c.values]
        if c.op == "range":
            return f"{label} {shown_n[0]}\u2013{shown_n[1]}"
        return f"{label} {_SIGNS.get(c.op, c.op)} {shown_n[0]}"
    if c.op == "lt":
        return f"{label} {say(lang, 'op_before')} {c.values[0]}"
    if c.values[1] == OPEN_END:
        return f"{label} {say(lang, 'op_from')} {c.values[0]}"
    if c.values[0] == OPEN_START:
        return f"{label} {say(lang, 'op_until')} {c.values[1]}"
    return f"{label} {c.values[0]} {say(lang, 'op_to')} {c.values[1]}"


def describe(conditions: list[Condition], vocab: Vocabulary, caller_id: int | None, lang: str = "en") -> str:
    return " \u00b7 ".join(c["label"] for c in chips(conditions, vocab, caller_id, lang))


def describe_all(result: StructuredResult, caller_id: int | None) -> str:
    """What was applied; with several types whose conditions differ, each type's ("owner: you (tickets)")."""
    u = result.understanding
    texts = {t: describe(u.conditions_of(t), result.vocab, caller_id, u.language) for t in u.targets}
    if len(set(texts.values())) <= 1:
        return describe(u.conditions, result.vocab, caller_id, u.language)
    return " / ".join(f"{text} ({noun(result.vocab, t, 2, u.language)})" for t, text in texts.items() if text)


def columns(result: StructuredResult) -> list[tuple[str, str]]:
    """(facet name, label) of the facets a list shows per record: the type's declared display facets,
    else its enums, people and due date."""
    vocab = result.vocab
    types = list(dict.fromkeys(r.source_type for r in result.records)) or [
        result.understanding.target_type or ""
    ]
    out: list[tuple[str, str]] = []
    for t in types:
        m = vocab.meaning(t)
        shown = [vocab.facets[n] for n in m.display if n in vocab.facets] or [
            f for f in vocab.facets_of(t) if (f.kind == "enum" and f.display) or f.person or f.name == m.due
        ]
        # a date or number the question compares ("requested before ...", "over 10000") is shown first,
        # so the reader can check each record against it
        asked = [
            vocab.facets[c.facet]
            for c in result.understanding.conditions_of(t)
            if c.facet in vocab.types.get(t, ()) and vocab.facets[c.facet].kind in ("date", "number")
        ]
        for f in [*dict.fromkeys(asked), *shown]:
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
            shown = value_text(result.vocab, name, value, None, result.understanding.language)
            out[label] = "-" if shown == "none" else shown
    return out


def _record_line(i: int, record: Record, result: StructuredResult, caller_id: int | None) -> list[str]:
    values = [
        v if label != "due" else f"due {v}"
        for label, v in record_values(record, result, caller_id).items()
        if v != "-" and _shows(record, result, label)
    ]
    head = f"{i}. {record.anchor} {record.title}"
    if values:
        head += " \u2014 " + " \u00b7 ".join(values)
    lines = [head]
    if record.passage:
        lines.append("   " + one_line(record.passage.replace("\n", " / "), 220))
    return lines


def _shows(record: Record, result: StructuredResult, label: str) -> bool:
    """A column belongs to the record's type (a list of several types has the columns of each)."""
    names = set(result.vocab.types.get(record.source_type, ()))
    return any(f.label == label and f.name in names for f in result.vocab.facets.values())


def _type_total(result: StructuredResult, lang: str) -> str | None:
    """ "12 tasks and 7 tickets" when the answer is about several types."""
    if len(result.totals) < 2:
        return None
    return describe_types(result.vocab, result.totals, lang)


def _footer(result: StructuredResult, lang: str) -> list[str]:
    u = result.understanding
    lines = []
    for note in u.notes:
        lines.append(say(lang, "note", note=note))
    if u.advice:
        lines.append(say(lang, "advice"))
    if u.read_as:
        lines.append(say(lang, "read_as", words=" \u00b7 ".join(u.read_as)))
    return lines


def render_text(result: StructuredResult, caller_id: int | None) -> str:
    text = _render_text(result, caller_id)
    extra = _footer(result, result.understanding.language)
    if extra and result.understanding.kind in (AnswerKind.LIST, AnswerKind.COUNT):
        text += "\n\n" + "\n".join(extra)
    elif result.understanding.read_as and result.understanding.kind == AnswerKind.LOOKUP:
        text += "\n\n" + "\n".join(extra)
    return text


def _render_text(result: StructuredResult, caller_id: int | None) -> str:
    u = result.understanding
    if u.kind == AnswerKind.NOTICE:
        return _notice_text(result)
    if u.kind == AnswerKind.LOOKUP:
        return _lookup_text(result)
    lang = u.language
    desc = describe_all(result, caller_id)
    total = result.total or 0
    lines: list[str] = []
    if u.kind == AnswerKind.COUNT:
        lines.extend(_count_lines(result, desc, caller_id))
    elif total == 0:
        lines.append(_none_line(result, desc))
    else:
        lines.append(_match_line(result, desc))
    if result.records and u.kind in (AnswerKind.LIST, AnswerKind.COUNT):
        lines.append("")
        if u.kind == AnswerKind.COUNT:
            lines.append(say(lang, "most_relevant", topic=result.ranked_by or u.topic))
        for i, r in enumerate(result.records, 1):
            lines.extend(_record_line(i, r, result, caller_id))
    if (
        u.topic
        and result.about is not None
        and total > result.about
        and (result.about or u.kind == AnswerKind.COUNT)
    ):
        lines.append("")
        lines.append(say(lang, "not_about", n=total - result.about, topic=u.topic))
    if u.conditions:
        lines.append("")
        lines.append(say(lang, "applied", desc=desc))
    return "\n".join(lines)


def _notice_text(result: StructuredResult) -> str:
    """Words said back, nothing searched: understood but applying to nothing, or values the data lacks."""
    u = result.understanding
    lang = u.language
    if not u.notices:
        said = [n[0].upper() + n[1:] + "." for n in u.notes]
        return "\n".join([*said, say(lang, "notice_unsearched")])
    notes = []
    for n in u.notices:
        message = n.message(result.vocab.facets[n.facet].label_in(lang), lang)
        notes.append(message[0].upper() + message[1:] + ("" if message.endswith("?") else "."))
    notes.append(say(lang, "notice_ask_again"))
    return "\n".join(notes)


def _none_line(result: StructuredResult, desc: str) -> str:
    """No record matches: "No tasks you may see match ..." / "Ninguna tarea visible para usted ..."."""
    u = result.understanding
    lang = u.language
    types = u.targets or [u.target_type or ""]
    joiner = say(lang, "or")
    nouns = joiner.join(noun(result.vocab, t, NONE_NOUN_NUMBER.get(lang, 2), lang) for t in types)
    article = say(lang, "article_a") if nouns.split(joiner)[0].endswith("a") else say(lang, "article")
    return say(lang, "match_none", nouns=nouns, desc=desc, article=article)


def _match_line(result: StructuredResult, desc: str) -> str:
    """How many match, and which of them are shown."""
    u = result.understanding
    lang = u.language
    total = result.total or 0
    shown = len(result.records)
    plural = _type_total(result, lang) or f"{total} {noun(result.vocab, u.target_type, total, lang)}"
    one = total == 1 and len(result.totals) <= 1
    first = say(lang, "match_one" if one else "match_many", plural=plural, desc=desc)
    if u.kind == AnswerKind.LIST and relevance.restricts(u.topic):
        return _about_line(result, first, shown)
    if shown < total:
        how = (
            say(lang, "by_relevance", ranked_by=result.ranked_by)
            if result.ranked_by
            else say(lang, "in_id_order")
        )
        return first + say(lang, "first_shown", shown=shown, how=how)
    return first + (":" if shown else ".")


def _about_line(result: StructuredResult, first: str, shown: int) -> str:
    """A list with a topic: how many of the matching records are about it (only those are listed)."""
    u = result.understanding
    lang = u.language
    total = result.total or 0
    if not shown:
        return (
            say(
                lang,
                "none_about",
                total=total,
                noun=noun(result.vocab, u.target_type, total, lang),
                filters=describe_all(result, None),
                topic=u.topic,
            ).rsplit(";", 1)[0]
            + "."
        )
    about = result.about if result.about is not None else shown
    verb = say(lang, "about_verb_one" if about == 1 else "about_verb_many")
    line = f"{first}; " + say(lang, "about", about=about, verb=verb, topic=u.topic)
    if shown < about:
        line += say(lang, "about_first", shown=shown)
    return line + ":"


def _count_lines(result: StructuredResult, desc: str, caller_id: int | None) -> list[str]:
    u = result.understanding
    vocab = result.vocab
    total = result.total or 0
    lang = u.language
    plural = _type_total(result, lang) or f"{total} {noun(vocab, u.target_type, total, lang)}"
    match = say(lang, "matching", desc=desc) if desc else ""
    if not u.group_by:
        return [f"{plural}{match}."]
    label = vocab.facets[u.group_by].label_in(lang)
    names = [(value_text(vocab, u.group_by, v, None, lang), n) for v, n in result.groups]
    lines = []
    if u.superlative and names:
        best_n = names[0][1]
        tied = [name for name, n in names if n == best_n]
        word = say(lang, "most" if u.superlative == "most" else "fewest")
        have = say(lang, "have_many" if len(tied) > 1 else "have_one")
        lines.append(
            say(
                lang,
                "superlative",
                tied=say(lang, "and").join(tied),
                have=have,
                word=word,
                nouns=noun(vocab, u.target_type, 2, lang),
                noun=noun(vocab, u.target_type, best_n, lang),
                match=match,
                best=best_n,
            )
        )
    else:
        lines.append(say(lang, "per_group", plural=plural, match=match, label=label))
    for name, n in names:
        lines.append(f"{name}: {n}")
    if not names:
        lines.append(say(lang, "no_groups"))
    return lines


def _lookup_facts(record: Record, result: StructuredResult, text: str) -> str:
    """A looked-up record's display facets its text does not already say (a SQL row's stage, dates,
    person), as "label: value" joined by middots."""
    vocab = result.vocab
    m = vocab.meaning(record.source_type)
    lang = result.understanding.language
    names = [n for n in m.display if n in vocab.facets] or [
        n for n in vocab.types.get(record.source_type, ())
    ]
    parts = []
    for name in names:
        value = record.facets.get(name)
        if value is None:
            continue
        shown = value_text(vocab, name, value, None, lang)
        if shown and shown not in text:
            parts.append(f"{vocab.facets[name].label_in(lang)}: {shown}")
    return " \u00b7 ".join(parts)


def _lookup_text(result: StructuredResult) -> str:
    u = result.understanding
    lines: list[str] = []
    for record in result.records:
        if lines:
            lines.append("")
        body = [line for line in record.content.strip().split("\n") if line.strip()]
        stored = f"[{record.source_type} #{record.source_id}]"
        head = body[0][len(stored) :].strip() if body[0].startswith(stored) else body[0]
        head = head[len(record.anchor) :].strip() if head.startswith(record.anchor) else head
        lines.append(f"{record.anchor} {head}")
        rest = body[1:]
        facts = _lookup_facts(record, result, "\n".join(body[:12]))
        if facts:
            lines.append(facts)
        if record.passage:
            lines.extend(line for line in rest[:2] if line not in record.passage)
            lines.extend(record.passage.split("\n"))
        else:
            lines.extend(rest[:12])
            if len(rest) > 12:
                lines.append("\u2026")
    if result.missing_lookups:
        what = noun(result.vocab, u.lookups[0][0] if len({t for t, _ in u.lookups}) == 1 else None, 1, "en")
        message = say(u.language, "not_visible", what=what)
        if result.records:
            lines.append("")
            message = (
                say(u.language, "some_not_visible", n=result.missing_lookups)
                + message[0].lower()
                + message[1:]
            )
        lines.append(message)
    return "\n".join(lines)


def structured_dict(result: StructuredResult, caller_id: int | None) -> dict[str, Any]:
    """The JSON fields for what was understood and computed."""
    u = result.understanding
    vocab = result.vocab
    cols = columns(result) if result.records else []
    group = None
    if u.group_by:
        group = {
            "facet": u.group_by,
            "label": vocab.facets[u.group_by].label,
            "rows": [
                {"value": v, "label": value_text(vocab, u.group_by, v, None, u.language), "count": n}
                for v, n in result.groups
            ],
        }
    return {
        "kind": u.kind,
        "type": u.target_type,
        "types": [{"type": t, "total": n} for t, n in result.totals] or None,
        "notes": list(u.notes),
        "read_as": list(u.read_as),
        "language": u.language,
        "filters": chips(u.conditions, vocab, caller_id, u.language),
        "dropped": list(u.dropped),
        "notices": [n.to_dict(vocab.facets[n.facet].label_in(u.language), u.language) for n in u.notices],
        "topic": u.topic or None,
        "total": result.total,
        "count": result.total if u.kind == "count" else None,
        "groups": group,
        "columns": [label for _, label in cols],
        "records": [
            {
                "anchor": r.anchor,
                "source_type": r.source_type,
                "source_id": r.source_id,
                "title": r.title,
                "values": record_values(r, result, caller_id),
            }
            for r in result.records
        ],
    }
