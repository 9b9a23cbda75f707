"""What answers say about relevance, per language (a third language is one more entry).

Kept as data, apart from the logic that chooses a sentence: the structured
list restricted to the records about its topic (``answers.service``), the
topic answered without a filter that left nothing about it, an open
question whose best evidence is weak, and the answer without a model
(``chat.answer``).
"""

from __future__ import annotations

from typing import Any

TEXT: dict[str, dict[str, str]] = {
    "en": {
        "extractive": "No language model is configured; here is what the most relevant records say:",
        "weak": "Nothing I can see says that: none of the records you may see is about \u201c{topic}\u201d. "
                "The closest ones:",
        "about": "{about} of them {verb} about \u201c{topic}\u201d",
        "about_verb_one": "is",
        "about_verb_many": "are",
        "not_about": "{n} match the filters but not \u201c{topic}\u201d.",
        "none_about": "None of the {total} {noun} matching {filters} is about \u201c{topic}\u201d; "
                      "without {filters}, about \u201c{topic}\u201d:",
    },
    "es": {
        "extractive": "No hay un modelo de lenguaje configurado; esto dicen los registros más relevantes:",
        "weak": "Nada de lo que puedo ver lo dice: ninguno de los registros que puede ver trata de "
                "\u201c{topic}\u201d. Los más cercanos:",
        "about": "{about} de ellos {verb} sobre \u201c{topic}\u201d",
        "about_verb_one": "trata",
        "about_verb_many": "tratan",
        "not_about": "{n} coinciden con los filtros pero no tratan de \u201c{topic}\u201d.",
        "none_about": "Ninguno de los {total} {noun} con {filters} trata de \u201c{topic}\u201d; "
                      "sin {filters}, sobre \u201c{topic}\u201d:",
    },
}


def say(language: str, key: str, **values: Any) -> str:
    """The sentence ``key`` in ``language`` (English when the language has none), filled with ``values``."""
    table = TEXT.get(language, TEXT["en"])
    return table.get(key, TEXT["en"][key]).format(**values)


def in_every_language(key: str) -> tuple[str, ...]:
    """The sentence ``key`` (without values to fill) as each language says it."""
    return tuple(table[key] for table in TEXT.values() if key in table)
