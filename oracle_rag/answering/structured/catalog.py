"""What structured answers say, per language: one catalog per language, a third language is one more.

Kept as data, apart from the logic that chooses a sentence (``answers.render``,
``answers.targets``, ``answers.understood``, the relevance sentences of
``answers.service`` and ``chat.answer``, and ``chat.answer``'s answer without
a model). Each entry is a ``str.format`` template; a template may leave out a value the other language uses
(English says how a list is ordered, Spanish does not). An entry a language lacks is
said in English; every language here has every entry (a test checks it).
"""

from __future__ import annotations

from typing import Any

EN: dict[str, str] = {
    # the answer without a model (chat.answer)
    "extractive": "No language model is configured; here is what the most relevant records say:",
    # after a model's checked answer: the records it cites, their sentences that answer the question
    "quoted": "In the records' own words:",
    # relevance: the structured list restricted to its topic, and an open question with weak evidence
    "weak": "Nothing I can see says that: none of the records you may see is about \u201c{topic}\u201d. "
    "The closest ones:",
    "about": "{about} of them {verb} about \u201c{topic}\u201d",
    "about_verb_one": "is",
    "about_verb_many": "are",
    "not_about": "{n} match the filters but not \u201c{topic}\u201d.",
    "none_about": "None of the {total} {noun} matching {filters} is about \u201c{topic}\u201d; "
    "without {filters}, about \u201c{topic}\u201d:",
    "about_first": ", the first {shown} by relevance",
    # a question's words as conditions of a record type (answers.targets)
    "and": " and ",
    "not_applicable": "\u201c{text}\u201d does not apply to {plural}: not applied",
    "not_applicable_why": "\u201c{text}\u201d does not apply to {plural} ({why}): not applied",
    "missing_lifecycle": "no lifecycle is declared",
    "missing_person": "no person facet is declared",
    "missing_due": "no due date is declared",
    "missing": "not declared",
    "no_completion_dates": "no completion dates are recorded for {plural}: \u201c{text}\u201d was "
    "not applied",
    "date_read_as": "\u201c{text}\u201d read as {label} (also dated: {others})",
    "no_dates": "{plural} have no dates: \u201c{text}\u201d was not applied",
    "which_number": "\u201c{text}\u201d: which number? ({names}); not applied",
    "no_numbers": "{plural} have no numbers: \u201c{text}\u201d was not applied",
    # a value the data does not have (answers.understood)
    "no_such": "no {label} named '{text}'",
    "did_you_mean": "{named} \u2014 did you mean {suggestion}?",
    # values and conditions in words (answers.render)
    "record_one": "record",
    "record_many": "records",
    "unassigned": "unassigned",
    "you": "you",
    "overdue_chip": "overdue",
    "op_not": "not",
    "op_none": "none",
    "op_any": "any",
    "op_before": "before",
    "op_to": "to",
    "op_from": "from",
    "op_until": "until",
    # the answer's text (answers.render)
    "notice_unsearched": "Nothing was filtered or searched by it.",
    "notice_ask_again": "Nothing was filtered by it: ask again with a known name.",
    "or": " or ",
    "match_none": "No {nouns} you may see match {desc}.",
    "article": "",  # English's "no" needs no article agreeing with the noun
    "article_a": "",
    "match_one": "{plural} matches {desc}",
    "match_many": "{plural} match {desc}",
    "first_shown": "; the first {shown} {how}:",
    "by_relevance": "by relevance to \u201c{ranked_by}\u201d",
    "in_id_order": "in id order",
    "most_relevant": "Most relevant to \u201c{topic}\u201d:",
    "applied": "Applied: {desc} (within what you may see).",
    "note": "Note: {note}.",
    "advice": "Nothing in the data says what comes next: these are the records not finished yet.",
    "read_as": "Read as: {words}.",
    "matching": " matching {desc}",
    "per_group": "{plural}{match}, per {label}:",
    "superlative": "{tied} {have} the {word} {nouns}{match}: {best}.",
    "have_one": "has",
    "have_many": "have",
    "most": "most",
    "fewest": "fewest",
    "no_groups": "(none)",
    "not_visible": "No {what} with that id is visible to you: it does not exist, or you may not see it.",
    "some_not_visible": "{n} of the records you named: ",
}

ES: dict[str, str] = {
    "extractive": "No hay un modelo de lenguaje configurado; esto dicen los registros más relevantes:",
    "quoted": "Con las palabras de los registros:",
    "weak": "Nada de lo que puedo ver lo dice: ninguno de los registros que puede ver trata de "
    "\u201c{topic}\u201d. Los más cercanos:",
    "about": "{about} de ellos {verb} sobre \u201c{topic}\u201d",
    "about_verb_one": "trata",
    "about_verb_many": "tratan",
    "not_about": "{n} coinciden con los filtros pero no tratan de \u201c{topic}\u201d.",
    "none_about": "Ninguno de los {total} {noun} con {filters} trata de \u201c{topic}\u201d; "
    "sin {filters}, sobre \u201c{topic}\u201d:",
    "about_first": ", los primeros {shown}",
    "and": " y ",
    "not_applicable": "\u201c{text}\u201d no se aplica a {plural}: no se aplicó",
    "not_applicable_why": "\u201c{text}\u201d no se aplica a {plural} ({why}): no se aplicó",
    "missing_lifecycle": "no se declara un ciclo de vida",
    "missing_person": "no se declara una persona",
    "missing_due": "no se declara una fecha de vencimiento",
    "missing": "no declarado",
    "no_completion_dates": "no hay fechas de finalización para {plural}: \u201c{text}\u201d no se aplicó",
    "date_read_as": "\u201c{text}\u201d leído como {label} (otras fechas: {others})",
    "no_dates": "{plural} no tienen fechas: \u201c{text}\u201d no se aplicó",
    "which_number": "\u201c{text}\u201d: ¿qué número? ({names}); no se aplicó",
    "no_numbers": "{plural} no tienen números: \u201c{text}\u201d no se aplicó",
    "no_such": "no hay ningún {label} llamado '{text}'",
    "did_you_mean": "{named} \u2014 ¿quiso decir {suggestion}?",
    "record_one": "registro",
    "record_many": "registros",
    "unassigned": "sin asignar",
    "you": "usted",
    "overdue_chip": "vencidas",
    "op_not": "no",
    "op_none": "ninguno",
    "op_any": "cualquiera",
    "op_before": "antes del",
    "op_to": "a",
    "op_from": "desde",
    "op_until": "hasta",
    "notice_unsearched": "No se ha filtrado ni buscado por ello.",
    "notice_ask_again": "No se ha filtrado por ello: pregunte de nuevo con un nombre conocido.",
    "or": " ni ",
    # "ninguna tarea", "ningún pedido": the article follows the first noun's ending (article_a: ends in "a")
    "match_none": "{article} {nouns} visible para usted coincide con {desc}.",
    "article": "Ningún",
    "article_a": "Ninguna",
    "match_one": "{plural} coincide con {desc}",
    "match_many": "{plural} coinciden con {desc}",
    "first_shown": "; los primeros {shown}:",  # says no order: by_relevance and in_id_order go unused
    "by_relevance": "por relevancia para \u201c{ranked_by}\u201d",
    "in_id_order": "por orden de id",
    # not translated yet: the answers say it in English
    "most_relevant": "Most relevant to \u201c{topic}\u201d:",
    "applied": "Aplicado: {desc} (dentro de lo que puede ver).",
    "note": "Nota: {note}.",
    "advice": "Los datos no dicen qué va después: estos son los registros sin terminar.",
    "read_as": "Leído como: {words}.",
    "matching": " con {desc}",
    "per_group": "{plural}{match}, por {label}:",
    "superlative": "{tied}: {best} {noun}{match}.",  # the count says the rest: have/most/fewest go unused
    "have_one": "tiene",
    "have_many": "tienen",
    "most": "más",
    "fewest": "menos",
    "no_groups": "(ninguna)",
    "not_visible": "No hay ningún registro con ese id visible para usted: no existe o no puede verlo.",
    "some_not_visible": "{n} de los registros: ",
}

TEXT: dict[str, dict[str, str]] = {"en": EN, "es": ES}

# How many records a "none of them" sentence names its nouns for: "no tasks" / "ninguna tarea".
NONE_NOUN_NUMBER: dict[str, int] = {"en": 2, "es": 1}


def say(language: str, key: str, **values: Any) -> str:
    """The sentence ``key`` in ``language`` (English when the language has none), filled with ``values``."""
    table = TEXT.get(language, EN)
    return table.get(key, EN[key]).format(**values)


def in_every_language(key: str) -> tuple[str, ...]:
    """The sentence ``key`` (without values to fill) as each language says it."""
    return tuple(table[key] for table in TEXT.values() if key in table)
