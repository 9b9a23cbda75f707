"""The words of questions that are not data: intents, negation, "my", dates, types, filler.

Everything here is accent- and case-folded (see :func:`fold`), English and
Spanish side by side. Facet values and their names are *not* here, nor the
words that name record types: they come from the sources' declarations
(``sources/meanings.py``), the data and ``sources.facets.SYNONYMS``.
"""

from __future__ import annotations

import unicodedata


def fold(text: str) -> str:
    """Lower case without accents: "Migración" -> "migracion", "ÑANDÚ" -> "nandu"."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


# Latin letters with marks, folded ahead (see :func:`fold_latin`).
_LATIN = {
    cp: "".join(c for c in unicodedata.normalize("NFKD", chr(cp).casefold()) if not unicodedata.combining(c))
    for cp in range(0xC0, 0x250)
}


def fold_latin(text: str) -> str:
    """:func:`fold` at C speed for text in Latin letters (a record's whole text, read for every record a
    list matches); other scripts go through :func:`fold`."""
    lowered = text.casefold()
    if lowered.isascii():
        return lowered
    quick = lowered.translate(_LATIN)
    return quick if quick.isascii() else fold(text)


def phrases(*items: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(fold(item).split()) for item in items)


# "how many ...", "cuántas ..."
COUNT = phrases(
    "how many",
    "how much",
    "number of",
    "count",
    "count of",
    "total number",
    "in total",
    "cuantas",
    "cuantos",
    "cuanta",
    "cuanto",
    "numero de",
    "cantidad de",
    "en total",
    "total de",
)
# Aggregates other than counting records (left to the model's guarded SQL when one is configured).
OTHER_AGGREGATE = frozenset(
    fold(w)
    for w in (
        "average",
        "avg",
        "mean",
        "median",
        "sum",
        "summed",
        "hours",
        "points",
        "estimate",
        "estimated",
        "velocity",
        "promedio",
        "mediana",
        "suma",
        "horas",
        "puntos",
        "estimacion",
        "velocidad",
    )
)
# Which aggregate a question asks of a measure (text-to-SQL repair: a model wrote AVG for "total").
AGGREGATE_WORDS = {
    "AVG": phrases("average", "avg", "mean", "on average", "promedio", "media", "en promedio"),
    "SUM": phrases(
        "total",
        "sum",
        "add up",
        "adds up",
        "add up to",
        "altogether",
        "summed",
        "suma",
        "suman",
        "sumar",
        "sumadas",
        "en total",
    ),
    "MAX": phrases(
        "largest",
        "highest",
        "biggest",
        "maximum",
        "max",
        "greatest",
        "maxima",
        "maximo",
        "mayor",
        "mas alta",
        "mas alto",
    ),
    "MIN": phrases(
        "smallest",
        "lowest",
        "minimum",
        "min",
        "least",
        "fewest",
        "minima",
        "minimo",
        "menor",
        "mas baja",
        "mas bajo",
    ),
}
# Measures an aggregate may be of, beside the number facets' own cue words ("largest estimate", "promedio
# de horas").
MEASURES = frozenset(
    fold(w)
    for w in (
        "estimate",
        "estimates",
        "estimated",
        "estimation",
        "hours",
        "hour",
        "points",
        "point",
        "velocity",
        "amount",
        "amounts",
        "cost",
        "costs",
        "duration",
        "size",
        "value",
        "estimacion",
        "estimaciones",
        "estimado",
        "horas",
        "hora",
        "puntos",
        "velocidad",
        "importe",
        "importes",
        "monto",
        "coste",
        "costo",
        "duracion",
        "tamano",
        "valor",
    )
)
# "per project", "por proyecto": these words followed by a facet's cue word.
GROUP_LEAD = phrases(
    "per",
    "by",
    "for each",
    "each",
    "for every",
    "every",
    "grouped by",
    "broken down by",
    "split by",
    "por",
    "por cada",
    "de cada",
    "en cada",
    "para cada",
    "cada",
    "agrupadas por",
    "agrupados por",
    "segun",
)
# "which project has the most ...", "quién tiene más ..."
MOST = phrases("most", "the most", "more", "mas", "la mayor cantidad", "el mayor numero")
FEWEST = phrases("fewest", "least", "the least", "the fewest", "menos")
WHO = phrases("who", "whom", "quien", "quienes")
# A negation applies to the value right after it (filler words may sit between).
NEGATION = phrases(
    "not",
    "no",
    "non",
    "never",
    "isnt",
    "arent",
    "isn't",
    "aren't",
    "except",
    "excluding",
    "other than",
    "but not",
    "ni",
    "excepto",
    "salvo",
    "menos",
    "sin contar",
    "que no",
    "nor",
)
NEGATION_GAP = frozenset(
    fold(w)
    for w in (
        "are",
        "is",
        "be",
        "been",
        "yet",
        "still",
        "currently",
        "marked",
        "as",
        "in",
        "the",
        "esten",
        "estan",
        "este",
        "esta",
        "son",
        "sean",
        "sea",
        "en",
        "las",
        "los",
        "la",
        "el",
    )
)
# The caller: "my", "mine", "mis", "tengo" ... ("I" and "me" only where they mean the caller's work:
# "do I have", "assigned to me"; "I have a problem with login" stays a topic question).
CALLER = phrases(
    "my",
    "mine",
    "myself",
    "assigned to me",
    "for me",
    "to me",
    "do i have",
    "have i got",
    "am i",
    "have i",
    "i own",
    "should i",
    "i am working on",
    "i m working on",
    "i work on",
    "mis",
    "mi",
    "mias",
    "mios",
    "mia",
    "mio",
    "tengo",
    "yo",
    "a mi",
    "asignadas a mi",
    "asignados a mi",
    "me quedan",
    "me tocan",
    "me han asignado",
    "me asignaron",
    "me corresponden",
    "me faltan",
)
# Words that make a sprint/project mention a request for the record itself.
RECORD_WORDS = frozenset(
    fold(w)
    for w in (
        "goal",
        "goals",
        "objective",
        "dates",
        "date",
        "start",
        "starts",
        "started",
        "end",
        "ends",
        "description",
        "summary",
        "summarize",
        "summarise",
        "about",
        "describe",
        "details",
        "info",
        "information",
        "when",
        "objetivo",
        "objetivos",
        "fechas",
        "fecha",
        "empieza",
        "termina",
        "descripcion",
        "resumen",
        "resume",
        "resumir",
        "detalles",
        "informacion",
        "cuando",
        "meta",
    )
)
# Prepositions that make "... in sprint 7" a filter on the sprint's tasks.
WITHIN = frozenset(
    fold(w)
    for w in ("in", "inside", "within", "during", "for", "of", "en", "dentro", "del", "de", "durante", "para")
)
# Where a facet word attaches (answers.attachment): the question words that stand for the records asked
# about ("what is blocked", "which sprint", "qué está bloqueado"), determiners, the words that link a record
# word to its topic ("tasks about ...", "tareas de ..."), and copulas that are not filler already.
ASKED_RECORDS = frozenset(fold(w) for w in ("what", "whats", "which", "que", "cual", "cuales"))
# ... of which these, unaccented, are also "that" ("dijo que era crítico"): a question word only accented
# ("qué") or opening the question.
ALSO_CONJUNCTION = frozenset({"que", "cual"})
DETERMINERS = frozenset(
    fold(w)
    for w in (
        "the",
        "a",
        "an",
        "this",
        "that",
        "these",
        "those",
        "our",
        "your",
        "their",
        "its",
        "his",
        "her",
        "el",
        "la",
        "los",
        "las",
        "un",
        "una",
        "unos",
        "unas",
        "este",
        "esta",
        "estos",
        "estas",
        "ese",
        "esa",
        "esos",
        "esas",
        "su",
        "sus",
        "nuestro",
        "nuestra",
        "nuestros",
        "nuestras",
    )
)
TOPIC_LINKS = frozenset(
    fold(w)
    for w in (
        "about",
        "on",
        "regarding",
        "concerning",
        "mentioning",
        "re",
        "for",
        "of",
        "sobre",
        "acerca",
        "de",
        "del",
        "con",
        "para",
        "relativas",
        "relativos",
        "relacionadas",
        "relacionados",
    )
)
# Conjunctions that start a clause of their own ("blocked *because of* the API change"): not topic words.
CONNECTIVES = frozenset(
    fold(w)
    for w in (
        "because",
        "since",
        "although",
        "though",
        "while",
        "unless",
        "until",
        "whether",
        "once",
        "porque",
        "aunque",
        "mientras",
        "hasta",
        "desde",
        "debido",
        "pues",
        "cuando",
        "si",
    )
)
AUXILIARIES = frozenset(
    fold(w) for w in ("did", "do", "does", "has", "have", "had", "will", "would", "can", "could", "should")
)
COPULAS = frozenset(
    fold(w)
    for w in (
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "get",
        "gets",
        "got",
        "become",
        "became",
        "remain",
        "remains",
        "es",
        "son",
        "era",
        "eran",
        "fue",
        "fueron",
        "sea",
        "sean",
        "esta",
        "estan",
        "estaba",
        "estaban",
        "estuvo",
        "estuvieron",
        "este",
        "esten",
        "sigue",
        "siguen",
        "queda",
        "quedan",
        "quedo",
        "quedaron",
    )
)
# Due dates ("overdue" is due before today and not done).
OVERDUE = phrases(
    "overdue",
    "past due",
    "late",
    "behind schedule",
    "past their due date",
    "past the due date",
    "missed their deadline",
    "vencida",
    "vencidas",
    "vencido",
    "vencidos",
    "atrasada",
    "atrasadas",
    "atrasado",
    "atrasados",
    "retrasada",
    "retrasadas",
    "fuera de plazo",
    "con retraso",
)
# Date windows relative to today; which date facet they are about comes from a cue word next to them
# ("opened this week", "due this week"), else the type's due date (sources/meanings.py).
WINDOWS = {
    "today": phrases("today", "hoy", "para hoy"),
    "tomorrow": phrases("tomorrow", "manana", "para manana"),
    "yesterday": phrases("yesterday", "ayer"),
    "this_week": phrases("this week", "this weeks", "esta semana", "para esta semana", "de esta semana"),
    "next_week": phrases(
        "next week", "la proxima semana", "la semana que viene", "proxima semana", "semana proxima"
    ),
    "last_week": phrases("last week", "past week", "la semana pasada", "semana pasada", "la ultima semana"),
    "this_month": phrases("this month", "este mes", "para este mes"),
    "last_month": phrases("last month", "el mes pasado", "mes pasado"),
    "this_year": phrases("this year", "este ano"),
}
# Words that name the due date of any type that declares one (beside its facet's own cues).
DUE_CUES = frozenset(
    fold(w)
    for w in (
        "due",
        "deadline",
        "deadlines",
        "vence",
        "vencen",
        "vencimiento",
        "vencimientos",
        "entrega",
        "plazo",
    )
)
# "Not finished" of the type's lifecycle facet (its declared done values excluded).
OPEN = phrases(
    "open",
    "still open",
    "not done",
    "not finished",
    "unfinished",
    "incomplete",
    "not completed",
    "not closed",
    "pending",
    "outstanding",
    "remaining",
    "unresolved",
    "not resolved",
    "left to do",
    "not done yet",
    "left",
    "still to do",
    "active",
    "abierta",
    "abiertas",
    "abierto",
    "abiertos",
    "sin terminar",
    "sin acabar",
    "sin cerrar",
    "sin completar",
    "sin resolver",
    "no terminadas",
    "no terminada",
    "no cerradas",
    "pendiente",
    "pendientes",
    "por terminar",
    "inacabadas",
    "no resueltas",
    "no resueltos",
    "quedan",
    "por hacer todavia",
    "sin resolver todavia",
)
# "Finished" of the type's lifecycle facet (its declared done values).
FINISHED = phrases(
    "finished",
    "completed",
    "resolved",
    "closed",
    "done",
    "solved",
    "terminadas",
    "terminados",
    "resueltas",
    "resueltos",
    "cerradas",
    "cerrados",
    "completadas",
    "completados",
    "finalizadas",
    "finalizados",
    "finish",
    "finalizar",
    "terminar",
    "complete",
)
# "No person" of the type's person facet ("unassigned").
NOBODY = phrases(
    "unassigned",
    "not assigned",
    "without an assignee",
    "without assignee",
    "nobody",
    "no one",
    "nobody is working on",
    "no one is working on",
    "nobody working on",
    "nobody owns",
    "nobody has",
    "no one has",
    "nadie trabaja en",
    "nadie esta trabajando en",
    "que nadie tiene",
    "no assignee",
    "no owner",
    "without an owner",
    "without owner",
    "sin asignar",
    "no asignadas",
    "no asignada",
    "no asignados",
    "sin responsable",
    "nadie",
    "sin dueno",
    "sin propietario",
)
# Questions that ask for advice the data does not hold ("what should I work on next?").
ADVICE = phrases(
    "work on next",
    "do next",
    "work next",
    "tackle next",
    "pick up next",
    "start next",
    "hacer ahora",
    "hacer despues",
    "trabajar ahora",
    "trabajar despues",
    "hacer a continuacion",
    "siguiente",
)
NO_DUE_DATE = phrases(
    "no due date",
    "without a due date",
    "without due date",
    "without a deadline",
    "sin fecha",
    "sin fecha de entrega",
    "sin fecha limite",
    "sin vencimiento",
)
BEFORE = phrases("before", "until", "by", "antes de", "antes del", "hasta")
AFTER = phrases("after", "since", "despues de", "despues del", "desde")

# Spanish and English words that tell the question's language.
SPANISH = frozenset(
    fold(w)
    for w in (
        "que",
        "qué",
        "cuales",
        "cuántas",
        "cuantas",
        "cuantos",
        "tareas",
        "tarea",
        "mis",
        "tengo",
        "del",
        "las",
        "los",
        "el",
        "la",
        "en",
        "por",
        "para",
        "con",
        "sin",
        "está",
        "están",
        "hay",
        "quién",
        "quien",
        "proyecto",
        "son",
        "esta",
        "semana",
        "y",
        "pero",
        "todas",
        "cuál",
        "dame",
        "muestrame",
        "lista",
        "asignadas",
        "estado",
        "prioridad",
        "sprint actual",
        "tiene",
        "tienen",
        "de",
    )
)
ENGLISH = frozenset(
    fold(w)
    for w in (
        "what",
        "which",
        "how",
        "many",
        "tasks",
        "task",
        "the",
        "of",
        "in",
        "are",
        "is",
        "my",
        "have",
        "show",
        "list",
        "with",
        "for",
        "and",
        "not",
        "who",
        "this",
        "week",
        "has",
        "there",
        "any",
        "does",
        "do",
        "me",
    )
)

# Words that look like a facet value in one language but are filler in the other
# (Spanish "todo" is "all", not the TODO status).
FALSE_FRIENDS = {"es": frozenset({"todo", "this"}), "en": frozenset()}

# Words that frame a topic rather than being part of it ("tasks that mention the API", "que mencionan").
TOPIC_FRAMES = frozenset(
    fold(w)
    for w in (
        "mention",
        "mentions",
        "mentioned",
        "mentioning",
        "talk",
        "talks",
        "talking",
        "related",
        "regarding",
        "concerning",
        "menciona",
        "mencionan",
        "mencionen",
        "mencione",
        "hablan",
        "habla",
        "relacionado",
        "relacionada",
        "relacionados",
        "relacionadas",
    )
)
# Filler: what is left after these is the topic of the question.
STOPWORDS = frozenset(
    fold(w)
    for w in """
a an the of in on at to for from with without by about into over under and or but nor not no yes
is are was were be been being am do does did have has had having can could should would will shall may might
must i me my mine we our us you your he she it its they them their this that these those there here
what which who whom whose when where why how many much any some all every each no none other others
show list give find tell display get see let please records record things thing
also just only still yet currently current now right ones one assigned s t d ll re ve m next last soon later
recently recent week weeks month today whats hows whos wheres
open closed done more most less least than then so if as per total number count anything something
everything somebody someone anyone everyone need needs needed left remaining pending
que qué cual cuales cuál cuáles quien quién quienes cuanto cuanta cuantos cuantas cuántos cuántas como cómo
donde dónde cuando cuándo el la los las lo un una unos unas de del al a en y o u e ni pero con sin por para
es son está están esta estan este estos estas ese esa esos esas hay haber ha han he tiene tienen tengo
mi mis tu tus su sus nuestro nuestra nuestros nuestras me te se nos le les yo
cosa cosas muestrame muéstrame dame dime lista listar ver mostrar enseñame todas todos toda todo
ya aun aún todavia todavía actualmente ahora solo sólo tambien también muy mas más menos
asignada asignadas asignado asignados pendiente pendientes numero número total cantidad
""".split()
)

# What the topic of a question never holds: filler, the words that frame or link a topic, connectives.
NOT_TOPIC = STOPWORDS | TOPIC_FRAMES | TOPIC_LINKS | CONNECTIVES

# The same word in English and Spanish, for software, support and business records in general (not one
# corpus's words): what lets "is about" (answering/structured/relevance.py) see a Spanish record hold an
# English topic and the reverse. Compared by their first letters like the topic's words, so one form of each
# is enough.
EN_ES = tuple(
    (fold(en), fold(es))
    for en, es in (
        ("account", "cuenta"),
        ("address", "direccion"),
        ("agreement", "acuerdo"),
        ("alert", "alerta"),
        ("application", "aplicacion"),
        ("app", "aplicacion"),
        ("approval", "aprobacion"),
        ("approve", "aprobar"),
        ("attachment", "adjunto"),
        ("authentication", "autenticacion"),
        ("backup", "respaldo"),
        ("balance", "saldo"),
        ("bank", "banco"),
        ("bill", "factura"),
        ("billing", "facturacion"),
        ("block", "bloquear"),
        ("blocked", "bloqueado"),
        ("branch", "sucursal"),
        ("browser", "navegador"),
        ("bug", "fallo"),
        ("cache", "cache"),
        ("cancel", "cancelar"),
        ("card", "tarjeta"),
        ("certificate", "certificado"),
        ("change", "cambio"),
        ("charge", "cargo"),
        ("client", "cliente"),
        ("close", "cerrar"),
        ("code", "codigo"),
        ("comma", "coma"),
        ("company", "empresa"),
        ("configuration", "configuracion"),
        ("connection", "conexion"),
        ("contract", "contrato"),
        ("country", "pais"),
        ("crash", "cierre"),
        ("customer", "cliente"),
        ("date", "fecha"),
        ("deactivate", "desactivar"),
        ("decision", "decision"),
        ("decide", "decidir"),
        ("delete", "eliminar"),
        ("delay", "retraso"),
        ("delivery", "entrega"),
        ("device", "dispositivo"),
        ("disable", "desactivar"),
        ("discount", "descuento"),
        ("document", "documento"),
        ("download", "descarga"),
        ("driver", "conductor"),
        ("duplicate", "duplicado"),
        ("email", "correo"),
        ("employee", "empleado"),
        ("enable", "activar"),
        ("error", "error"),
        ("expire", "expirar"),
        ("export", "exportar"),
        ("failure", "falla"),
        ("fee", "comision"),
        ("file", "archivo"),
        ("fix", "arreglo"),
        ("form", "formulario"),
        ("import", "importar"),
        ("installation", "instalacion"),
        ("integration", "integracion"),
        ("invoice", "factura"),
        ("key", "clave"),
        ("language", "idioma"),
        ("limit", "limite"),
        ("load", "carga"),
        ("lock", "bloqueo"),
        ("log", "registro"),
        ("login", "sesion"),
        ("logout", "sesion"),
        ("memory", "memoria"),
        ("message", "mensaje"),
        ("migration", "migracion"),
        ("minute", "minuto"),
        ("mobile", "movil"),
        ("month", "mes"),
        ("notification", "notificacion"),
        ("number", "numero"),
        ("order", "pedido"),
        ("outage", "caida"),
        ("password", "contrasena"),
        ("payment", "pago"),
        ("performance", "rendimiento"),
        ("permission", "permiso"),
        ("phone", "telefono"),
        ("price", "precio"),
        ("printer", "impresora"),
        ("provider", "proveedor"),
        ("purchase", "compra"),
        ("receipt", "recibo"),
        ("refund", "reembolso"),
        ("reject", "rechazar"),
        ("release", "lanzamiento"),
        ("report", "reporte"),
        ("request", "solicitud"),
        ("reset", "restablecer"),
        ("restart", "reiniciar"),
        ("role", "rol"),
        ("schedule", "horario"),
        ("search", "busqueda"),
        ("security", "seguridad"),
        ("send", "enviar"),
        ("server", "servidor"),
        ("session", "sesion"),
        ("setting", "ajuste"),
        ("shipment", "envio"),
        ("sign", "firma"),
        ("signature", "firma"),
        ("slow", "lento"),
        ("store", "tienda"),
        ("subscription", "suscripcion"),
        ("supplier", "proveedor"),
        ("support", "soporte"),
        ("sync", "sincronizacion"),
        ("synchronization", "sincronizacion"),
        ("tax", "impuesto"),
        ("ticket", "ticket"),
        ("timeout", "espera"),
        ("transfer", "transferencia"),
        ("update", "actualizacion"),
        ("upgrade", "actualizacion"),
        ("upload", "subir"),
        ("user", "usuario"),
        ("version", "version"),
        ("warehouse", "almacen"),
        ("workaround", "solucion"),
    )
)
