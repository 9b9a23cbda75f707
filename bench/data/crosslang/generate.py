"""Write bench/data/crosslang (this folder): Spanish questions about English tasks, and English questions about Spanish ones.

The records are the demo's tasks (``oracle_rag.demo.seed.generate``, default
seed): one record per distinct title, its text the title and the
description of the title's first task, at most :data:`PER_TOPIC` records per
topic (the object of the title, e.g. "SSO with Azure AD"), in generation
order. A question is about one topic and is written in the *other* language
than the topic's records; the records of that topic are its relevant ones
(grade 1), so Recall@10 can reach 1. Each record names its language
(``language``), so a bench can tell how many of a question's top 10 are in
the question's own language.

Topics that exist in both languages (the invoice PDFs, password reset
emails, push notifications, offline sync, dashboard performance, report
exports and the checkout form have an English and a Spanish variant in the
demo) get no question: a Spanish question about them would rightly find
Spanish records too, which the judgements could not call wrong.

The questions come from hand-written translations of each topic (below)
put into a few question forms, so the set is derived, deterministic and
readable: 18 English topics x 4 Spanish forms = 72 Spanish questions,
7 Spanish topics x 2 English phrasings x 5 forms = 70 English questions.

Run: ``.venv/bin/python bench/data/crosslang/generate.py`` rewrites the files;
``--check`` exits 1 if the committed files differ from what it would write
(tests/test_crosslang_data.py runs that).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
ROOT = OUT.parents[2]
sys.path.insert(0, str(ROOT))

from oracle_rag.demo.seed import EN_OBJECTS, ES_OBJECTS, generate  # noqa: E402

PER_TOPIC = 8

EN_TOPICS_IN_SPANISH = {
    "login timeout on the mobile app": "el tiempo de espera del inicio de sesión en la aplicación móvil",
    "payment retry logic": "la lógica de reintentos de pago",
    "search ranking for product names": "el orden de los resultados al buscar nombres de producto",
    "API rate limiting": "la limitación de peticiones a la API",
    "database connection pool leak": "la fuga en el pool de conexiones a la base de datos",
    "dark mode in the settings page": "el modo oscuro en la página de ajustes",
    "audit log retention": "la conservación de los registros de auditoría",
    "currency rounding in invoices": "el redondeo de divisas en las facturas",
    "Kafka consumer lag alerts": "las alertas de retraso de los consumidores de Kafka",
    "SSO with Azure AD": "el inicio de sesión único con Azure AD",
    "onboarding tutorial screens": "las pantallas del tutorial de bienvenida",
    "flaky integration tests": "las pruebas de integración inestables",
    "GDPR data deletion requests": "las solicitudes de borrado de datos por el RGPD",
    "image upload size limit": "el límite de tamaño al subir imágenes",
    "Kubernetes liveness probes": "las sondas de disponibilidad de Kubernetes",
    "timezone handling in due dates": "la gestión de zonas horarias en las fechas de entrega",
    "caching of exchange rates": "la caché de los tipos de cambio",
    "accessibility of the navigation menu": "la accesibilidad del menú de navegación",
}

ES_TOPICS_IN_ENGLISH = {
    "el error de inicio de sesión en Android": (
        "the Android login error",
        "sign-in failures on Android phones",
    ),
    "los permisos de usuarios administradores": (
        "admin user permissions",
        "what administrators are allowed to do",
    ),
    "la búsqueda de clientes por NIF": ("looking up customers by tax ID", "customer search by VAT number"),
    "el despliegue en Kubernetes": ("the Kubernetes deployment", "deploying the services to Kubernetes"),
    "las alertas de monitorización": ("the monitoring alerts", "alerting from our monitoring"),
    "la copia de seguridad nocturna": ("the nightly backup", "the backup that runs every night"),
    "la traducción de la interfaz al portugués": (
        "translating the UI into Portuguese",
        "the Portuguese version of the interface",
    ),
}

SPANISH_FORMS = ["tareas sobre {x}", "¿quién está trabajando en {x}?", "problemas con {x}", "estado de {x}"]
ENGLISH_FORMS = [
    "tasks about {x}",
    "who is working on {x}?",
    "problems with {x}",
    "status of {x}",
    "what is left to do on {x}?",
]


def _spanish(form: str, topic: str) -> str:
    return form.format(x=topic).replace(" de el ", " del ")


def build() -> dict[str, str]:
    """File name -> content of the data set."""
    assert set(EN_TOPICS_IN_SPANISH) <= set(EN_OBJECTS) and set(ES_TOPICS_IN_ENGLISH) <= set(ES_OBJECTS)
    tasks = generate(2000, 42, today=dt.date(2026, 1, 5))["tasks"]
    topics = sorted(EN_OBJECTS + ES_OBJECTS, key=len, reverse=True)
    records: dict[str, list[dict[str, str]]] = {}
    seen: set[str] = set()
    for task in tasks:
        title = task["title"]
        if title in seen:
            continue
        seen.add(title)
        topic = next(t for t in topics if title.endswith(" " + t))
        rows = records.setdefault(topic, [])
        if len(rows) < PER_TOPIC:
            rows.append(
                {
                    "_id": str(task["id"]),
                    "title": title,
                    "text": task["description"] or "",
                    "language": "en" if topic in EN_OBJECTS else "es",
                }
            )
    corpus = sorted((r for rows in records.values() for r in rows), key=lambda r: int(r["_id"]))
    queries: list[dict[str, str]] = []
    qrels: list[tuple[str, str]] = []

    def ask(text: str, topic: str) -> None:
        qid = f"q{len(queries) + 1}"
        queries.append(
            {"_id": qid, "text": text, "language": "es" if topic in EN_OBJECTS else "en", "topic": topic}
        )
        qrels.extend((qid, r["_id"]) for r in records[topic])

    for topic, spanish in EN_TOPICS_IN_SPANISH.items():
        for form in SPANISH_FORMS:
            ask(_spanish(form, spanish), topic)
    for topic, phrasings in ES_TOPICS_IN_ENGLISH.items():
        for phrase in phrasings:
            for form in ENGLISH_FORMS:
                ask(form.format(x=phrase), topic)

    def jsonl(rows: list[dict[str, str]]) -> str:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)

    return {
        "corpus.jsonl": jsonl(corpus),
        "queries.jsonl": jsonl(queries),
        "qrels.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed files, write nothing"
    )
    args = parser.parse_args(argv)
    files = build()
    if args.check:
        stale = [
            n
            for n, text in files.items()
            if not (OUT / n).is_file() or (OUT / n).read_text(encoding="utf-8") != text
        ]
        if stale:
            print(f"stale: {', '.join(stale)}: run bench/data/crosslang/generate.py")
            return 1
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(
        f"wrote {OUT}: {files['corpus.jsonl'].count(chr(10))} records, "
        f"{files['queries.jsonl'].count(chr(10))} questions"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
