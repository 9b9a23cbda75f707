"""What happened on each demo task: a symptom, its root cause, a workaround, a decision, who said which.

A demo whose descriptions are a handful of templates cannot answer an open
question: *why does the invoice PDF come out blank?* would match a hundred
identical sentences. Here every task's free text is composed from parts
that belong to its component (the object of its title): a symptom seen at
one customer, a root cause, a workaround, a decision and, for a blocked
task, what blocks it. The comment thread tells the parts in order, each
comment by the author the generator drew for it (so *who found the cause*
has one answer), and the description carries the parts no comment tells.

The parts come from a random stream of their own, seeded by the demo's seed
and the task's id: the draws that decide titles, statuses, assignees, dates
and thread shapes are untouched by the text, and a task's story does not
depend on how many tasks are generated. No two tasks share a symptom
sentence (a clash is drawn again), so a question that names the symptom has
one answering task.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Kit:
    """What can go wrong with one component, in the language of its tasks."""

    module: str
    symptoms: tuple[str, ...]  # slots: {customer}, {n}
    causes: tuple[str, ...]  # "1:..." fits only the second symptom, "0:..." only the first, untagged both
    workarounds: tuple[str, ...]

    def fitting(self, parts: tuple[str, ...], symptom: int) -> list[str]:
        """The parts that can follow symptom number ``symptom``, without their tag."""
        out = []
        for part in parts:
            tag, sep, text = part.partition(":")
            if not (sep and tag.isdigit()):
                out.append(part)
            elif int(tag) == symptom:
                out.append(text)
        return out


def _kit(module: str, symptoms: list[str], causes: list[str], workarounds: list[str]) -> Kit:
    return Kit(module, tuple(symptoms), tuple(causes), tuple(workarounds))


EN_KITS: dict[str, Kit] = {
    "login timeout on the mobile app": _kit(
        "the session service",
        [
            "field technicians at {customer} are logged out after {n} minutes even while they type a report",
            "the mobile app shows 'session expired' on the first screen for {customer} after {n} "
            "minutes idle",
        ],
        [
            "the refresh token is requested on the UI thread and Android kills the call when the screen "
            "turns off",
            "the app reads the session lifetime in seconds but the server sends it in minutes",
            "the load balancer drops idle websockets after 60 seconds and the app takes that for a logout",
        ],
        [
            "turn on 'Keep me signed in' in the app settings",
            "raise the session lifetime of the tenant to 8 hours in the admin console",
        ],
    ),
    "invoice PDF generation": _kit(
        "the invoice renderer",
        [
            "PDF invoices for {customer} come out blank after page {n}",
            "the monthly invoice batch for {customer} runs for over {n} minutes and times out",
        ],
        [
            "the renderer loads the logo image again for every line item",
            "0:the font of the totals has no euro sign and the renderer aborts the page",
            "1:the HTML template is rendered twice because the queue consumer retries on a slow page",
        ],
        [
            "0:download the invoice as HTML and print it to PDF from the browser",
            "1:split the batch by region and run it after 22:00",
        ],
    ),
    "payment retry logic": _kit(
        "the payment scheduler",
        [
            "{customer} was charged {n} times for the same invoice",
            "failed card payments of {customer} are not retried for {n} days",
        ],
        [
            "0:the retry job sends no idempotency key to the gateway",
            "0:the retry counter lives in memory and resets on every deploy",
            "1:card declines with code 51 are classified as permanent failures",
        ],
        [
            "0:refund the duplicates from the gateway dashboard and mark the invoice as paid by hand",
            "1:trigger the retry from the billing admin page",
        ],
    ),
    "CSV export of monthly reports": _kit(
        "the reporting exporter",
        [
            "the CSV export for {customer} stops after {n} thousand rows",
            "Excel opens the CSV export of {customer} in a single column ({n} columns expected)",
        ],
        [
            "0:the export streams from a cursor that closes after the default fetch size",
            "1:the file has semicolon separators but no byte order mark, so Excel guesses the wrong encoding",
            "0:the query pages by offset and skips rows inserted while the export runs",
        ],
        ["0:export one week at a time", "1:open the file with Data > From Text in Excel and choose UTF-8"],
    ),
    "password reset emails": _kit(
        "the mail sender",
        [
            "password reset emails for {customer} arrive {n} minutes late",
            "users at {customer} get reset links that have expired {n} minutes before they arrive",
        ],
        [
            "the mail queue shares one worker with the weekly newsletter",
            "1:the reset link is signed with the clock of one node that drifts by several minutes",
            "1:the customer's mail gateway follows links to scan them and uses up the one-time token",
        ],
        [
            "an admin sends the reset link from the user's profile page",
            "allowlist our sending domain in the customer's mail gateway",
        ],
    ),
    "search ranking for product names": _kit(
        "the search indexer",
        [
            "searching for exact product names at {customer} shows {n} accessories before the product",
            "products that {customer} added in the last {n} days never reach the first page of results",
        ],
        [
            "0:the title field lost its boost over the description when the analyzer changed",
            "0:the synonym list expands every model number to its whole series",
            "1:the nightly reindex skips products that have no category",
        ],
        [
            "0:put the product name in quotes to force a phrase match",
            "pin the key products with a manual boost rule",
        ],
    ),
    "API rate limiting": _kit(
        "the API gateway",
        [
            "the integration of {customer} gets HTTP 429 after only {n} requests per minute",
            "one script at {customer} uses up the quota of the whole tenant in {n} minutes",
        ],
        [
            "the limiter counts requests per tenant instead of per API key",
            "0:each gateway node refills its own token bucket, so the real limit depends on how many nodes "
            "are up",
            "0:retries from our SDK are counted as new requests",
        ],
        ["issue a separate API key for the batch job", "0:set the SDK's backoff to 2 seconds"],
    ),
    "database connection pool leak": _kit(
        "the orders service",
        [
            "the orders service of {customer} runs out of database connections after about {n} hours",
            "the nightly import of {customer} hangs with 'pool exhausted' after {n} minutes",
        ],
        [
            "a connection is not returned to the pool when a query times out in the report endpoint",
            "the health check opens a new connection every 10 seconds and never closes it",
            "the import job leaves a transaction open and holds its connection until the process restarts",
        ],
        [
            "restart the service every night with the scheduled job",
            "raise the pool size from 20 to 60 until the fix is deployed",
        ],
    ),
    "dark mode in the settings page": _kit(
        "the settings page",
        [
            "labels on the settings page are unreadable in dark mode on the tablets of {customer} "
            "({n} reports)",
            "the dark mode switch turns itself off after {n} logins for users at {customer}",
        ],
        [
            "0:the legacy form components have black text colours hard-coded",
            "1:the preference is kept in a cookie that the single sign-on redirect clears",
            "0:the theme stylesheet loads after the page has rendered",
        ],
        ["0:use the high-contrast theme", "1:set the theme on the profile page instead of the settings page"],
    ),
    "push notification delivery": _kit(
        "the notification service",
        [
            "push notifications reach the iPhones of {customer} up to {n} minutes late",
            "{n} percent of the push notifications to the devices of {customer} are never delivered",
        ],
        [
            "1:production uses the sandbox APNs certificate",
            "1:device tokens are not refreshed after the app is reinstalled",
            "0:the sender waits for a full batch of 500 messages before it sends",
        ],
        ["pull new jobs with the refresh button", "send critical alerts by SMS"],
    ),
    "offline sync conflicts": _kit(
        "the sync engine",
        [
            "work orders that technicians of {customer} edit offline overwrite {n} office edits a day",
            "after {n} hours offline the app duplicates every form of {customer}",
        ],
        [
            "0:conflicts are settled by last write wins on the device clock",
            "1:the sync cursor is kept per user instead of per device",
            "1:deleted records leave no tombstone, so they come back on the next sync",
        ],
        [
            "0:sync before going into the field and do not edit the same order from the office",
            "1:clear the local cache from the diagnostics screen",
        ],
    ),
    "audit log retention": _kit(
        "the audit store",
        [
            "audit entries of {customer} older than {n} days are missing",
            "the audit table of {customer} grew by {n} GB in one month",
        ],
        [
            "0:the purge job uses the date of the partition, not of the entry",
            "production still has the trial's retention setting",
            "1:the archive export fails silently on rows with text that is not UTF-8",
        ],
        [
            "1:export the entries to the archive bucket by hand each month",
            "run the purge for one tenant at a time",
        ],
    ),
    "currency rounding in invoices": _kit(
        "the invoicing engine",
        [
            "invoice totals for {customer} differ by {n} cents from the sum of their lines",
            "invoices of {customer} in Japanese yen show two decimals on {n} lines",
        ],
        [
            "0:each line is rounded before tax instead of the total after tax",
            "0:the discount module stores amounts as floating point numbers",
            "1:the currency table has the wrong number of decimals for the yen",
        ],
        [
            "0:issue a credit note for the difference",
            "0:set rounding per total in the customer's billing profile",
            "1:correct the yen invoices by hand before they are sent",
        ],
    ),
    "Kafka consumer lag alerts": _kit(
        "the ingestion consumers",
        [
            "the lag alert on the topic of {customer} fires every night for {n} minutes",
            "consumer lag on the topic of {customer} reached {n} thousand messages before anyone was alerted",
        ],
        [
            "the alert compares the lag of each partition with a threshold meant for the whole topic",
            "1:the consumers rebalance on every deploy because the session timeout is 10 seconds",
            "0:the nightly compaction slows the brokers down and the alert has no grace period",
        ],
        [
            "0:silence the alert between 01:30 and 03:00",
            "scale the consumer group to 6 instances before the nightly load",
        ],
    ),
    "SSO with Azure AD": _kit(
        "the identity service",
        [
            "users from {customer} get error AADSTS50011 when they sign in ({n} tickets so far)",
            "users of {customer} lose their group memberships after signing in with Azure AD ({n} users)",
        ],
        [
            "0:the reply URL registered in Azure still points to the old domain",
            "1:Azure drops the group claims of users who are in more than 150 groups",
            "0:the signing certificate rotated and we cache the old key for 24 hours",
        ],
        [
            "0:sign in with a local account that support creates",
            "1:assign the roles by hand in the admin console",
        ],
    ),
    "onboarding tutorial screens": _kit(
        "the onboarding flow",
        [
            "the onboarding tutorial starts again every time users at {customer} open the app "
            "({n} complaints)",
            "new users at {customer} get stuck on step {n} of the tutorial",
        ],
        [
            "0:the 'tutorial done' flag is saved only when the last screen is closed with its button",
            "1:the Portuguese translations of step 4 are missing and the screen crashes",
            "1:the tutorial waits for a permission prompt that tablets never show",
        ],
        [
            "skip the tutorial with the link in the footer",
            "support marks the tutorial as completed for the user",
        ],
    ),
    "slow dashboard queries": _kit(
        "the dashboard API",
        [
            "the dashboard of {customer} takes {n} seconds to load",
            "the monthly revenue widget of {customer} times out after {n} seconds",
        ],
        [
            "the query on the events table has no index on tenant and creation date",
            "the widget recomputes twelve months of data on every request instead of reading the "
            "daily rollup",
            "a lazy load in the ORM runs one query per chart series",
        ],
        [
            "use the weekly view, which reads the rollup",
            "schedule the report by email instead of opening the dashboard",
        ],
    ),
    "flaky integration tests": _kit(
        "the CI pipeline",
        [
            "the integration suite of the {customer} connector fails in {n} percent of CI runs",
            "the {customer} connector tests pass locally but fail on CI when {n} workers run them",
        ],
        [
            "the tests share one database schema and delete each other's fixtures",
            "a test waits a fixed 2 seconds for the queue instead of polling it",
            "the fake payment server picks a random port that sometimes clashes",
        ],
        ["re-run the failed job once", "run the suite with a single worker on the release branch"],
    ),
    "GDPR data deletion requests": _kit(
        "the privacy service",
        [
            "deletion requests from users of {customer} stay pending for {n} days",
            "{n} users of {customer} who were deleted still appear in the analytics warehouse",
        ],
        [
            "0:the deletion job stops at the first service that does not answer",
            "1:the warehouse copy is not part of the deletion workflow",
            "0:requests are matched by email address, so users who changed their email are skipped",
        ],
        [
            "0:the privacy team deletes the records by hand with the runbook",
            "1:anonymise the warehouse rows with the monthly script",
        ],
    ),
    "image upload size limit": _kit(
        "the upload service",
        [
            "photos over {n} MB from the technicians of {customer} fail to upload",
            "uploads from {customer} are rejected with HTTP 413 even for images of {n} KB",
        ],
        [
            "the ingress has a 1 MB body limit that overrides the service's own limit",
            "0:the app sends images uncompressed since the camera library was updated",
            "0:HEIC photos are converted on the server and the converted file exceeds the limit",
        ],
        ["0:lower the camera resolution in the app settings", "upload the photos from the web portal"],
    ),
    "Kubernetes liveness probes": _kit(
        "the cluster",
        [
            "the billing pods of {customer} restart every {n} minutes under load",
            "pods are killed {n} times during the nightly import of {customer}",
        ],
        [
            "the liveness probe calls an endpoint that checks the database, so a slow database kills "
            "healthy pods",
            "the probe times out after 1 second and garbage collection pauses last longer",
            "the probe starts before the JVM has warmed up",
        ],
        ["raise the probe's failure threshold to 6", "scale the deployment up before the import"],
    ),
    "error messages on the checkout form": _kit(
        "the checkout form",
        [
            "shoppers of {customer} see 'Error 0' when their card is declined ({n} reports this week)",
            "the checkout form of {customer} shows the error under the wrong field in {n} languages",
        ],
        [
            "0:gateway error codes are not mapped to messages, so the raw code is shown",
            "1:the postcode is validated with the Spanish pattern for every country",
            "1:the error messages are translated only into English",
        ],
        [
            "0:support tells shoppers to try another card or call their bank",
            "1:turn off postcode validation for that country in the admin",
        ],
    ),
    "timezone handling in due dates": _kit(
        "the scheduling module",
        [
            "due dates of the team of {customer} in Mexico show one day early on {n} tasks",
            "reminders for {customer} are sent {n} hours late since the daylight saving change",
        ],
        [
            "0:dates are stored as midnight UTC and shown in the browser's timezone",
            "1:the reminder job runs in the server's timezone instead of the user's",
            "1:the container image carries a timezone database from 2019",
        ],
        ["0:enter due dates with a time of 12:00", "set the user's timezone explicitly in the profile"],
    ),
    "caching of exchange rates": _kit(
        "the pricing service",
        [
            "prices for {customer} use an exchange rate that is {n} days old",
            "the exchange rate provider billed us for {n} thousand calls made for {customer}",
        ],
        [
            "1:the cache key includes the time of the request, so nothing is ever reused",
            "0:the cache stops expiring after the provider returned one error",
            "1:every pod keeps its own cache and refreshes it when it starts",
        ],
        [
            "0:flush the cache from the ops console every morning",
            "set a fixed rate for the currency of the customer's contract",
        ],
    ),
    "accessibility of the navigation menu": _kit(
        "the navigation menu",
        [
            "screen reader users at {customer} cannot open the {n} submenus",
            "keyboard focus is lost after menu item {n} for users at {customer}",
        ],
        [
            "0:the menu items are divs without a role or aria-expanded",
            "1:a focus trap from the search overlay stays active",
            "0:the submenus open on mouse hover only",
        ],
        ["use the site map linked in the footer", "reach the pages through the search box"],
    ),
}

ES_KITS: dict[str, Kit] = {
    "el error de inicio de sesión en Android": _kit(
        "el servicio de sesiones",
        [
            "los técnicos de {customer} no pueden iniciar sesión en Android desde hace {n} días",
            "la app de Android se cierra al pulsar 'Entrar' en {n} móviles de {customer}",
        ],
        [
            "1:la librería de biometría no es compatible con Android 14 y lanza una excepción",
            "0:el certificado del servidor no incluye la cadena intermedia y Android lo rechaza",
            "0:el token se guarda cifrado con una clave que se borra al restaurar el móvil",
        ],
        ["1:desactivar el acceso con huella en los ajustes de la app", "iniciar sesión desde el portal web"],
    ),
    "la generación de facturas en PDF": _kit(
        "el generador de facturas",
        [
            "las facturas en PDF de {customer} salen sin logotipo desde hace {n} días",
            "la generación de facturas de {customer} tarda más de {n} minutos",
        ],
        [
            "0:la plantilla apunta al logotipo con una URL interna que ya no existe",
            "1:cada factura abre una conexión nueva al almacén de documentos",
            "1:la plantilla descarga la fuente completa en cada factura",
        ],
        ["0:descargar la factura en HTML e imprimirla a PDF", "1:generar las facturas en lotes de cien"],
    ),
    "la sincronización sin conexión": _kit(
        "el motor de sincronización",
        [
            "los partes que {customer} edita sin conexión se duplican al sincronizar ({n} casos)",
            "la sincronización de {customer} tarda {n} minutos con mala cobertura",
        ],
        [
            "0:la app reintenta el envío sin identificador de operación y el servidor crea otro parte",
            "1:se sincroniza la base de datos completa en lugar de los cambios",
            "0:el reloj del móvil decide los conflictos",
        ],
        ["1:sincronizar con wifi antes de salir", "0:borrar los duplicados desde el panel de oficina"],
    ),
    "los correos de recuperación de contraseña": _kit(
        "el envío de correos",
        [
            "los correos de recuperación no llegan a {n} usuarios de {customer}",
            "los enlaces de recuperación de {customer} caducan a los {n} minutos",
        ],
        [
            "0:el dominio de envío no tiene registro SPF y el servidor del cliente rechaza los correos",
            "1:la caducidad se configuró en segundos en lugar de minutos",
            "0:la cola de correos comparte proceso con los informes nocturnos",
        ],
        [
            "un administrador restablece la contraseña desde la ficha del usuario",
            "0:pedir al cliente que añada nuestro dominio a su lista blanca",
        ],
    ),
    "el rendimiento del panel de control": _kit(
        "el panel de control",
        [
            "el panel de control de {customer} tarda {n} segundos en cargar",
            "el gráfico de ventas de {customer} se queda en blanco tras {n} segundos",
        ],
        [
            "la consulta de ventas no usa el índice por fecha",
            "cada gráfico pide los datos de todo el año",
            "la caché del panel se invalida con cada pedido nuevo",
        ],
        ["usar la vista semanal", "programar el informe por correo"],
    ),
    "la exportación de informes a Excel": _kit(
        "el exportador de informes",
        [
            "la exportación a Excel de {customer} se corta en {n} mil filas",
            "las fechas salen como números en {n} columnas del Excel de {customer}",
        ],
        [
            "0:el exportador usa el formato XLS antiguo, que tiene un límite de filas",
            "1:las fechas se escriben como texto sin formato de celda",
            "0:la exportación se hace en memoria y el proceso se queda sin RAM",
        ],
        ["0:exportar mes a mes", "exportar a CSV y abrirlo en Excel"],
    ),
    "las notificaciones push en iOS": _kit(
        "el servicio de notificaciones",
        [
            "las notificaciones push no llegan a {n} iPhone de {customer}",
            "las notificaciones de {customer} llegan con {n} minutos de retraso",
        ],
        [
            "0:el certificado de APNs caducó y nadie recibió el aviso",
            "0:los tokens de los dispositivos no se renuevan al reinstalar la app",
            "1:el envío espera a llenar lotes de 500 mensajes",
        ],
        ["refrescar la lista de avisos a mano", "enviar los avisos urgentes por SMS"],
    ),
    "la validación del formulario de pago": _kit(
        "el formulario de pago",
        [
            "el formulario de pago rechaza {n} códigos postales de Portugal de {customer}",
            "el formulario de pago de {customer} aceptó {n} tarjetas caducadas",
        ],
        [
            "0:el código postal se valida con el patrón español para todos los países",
            "1:la fecha de caducidad se compara con el primer día del mes",
            "1:la validación solo se hace en el navegador",
        ],
        [
            "0:desactivar la validación del código postal para ese país",
            "1:el equipo de cobros revisa los pagos a mano",
        ],
    ),
    "los permisos de usuarios administradores": _kit(
        "el módulo de permisos",
        [
            "los administradores de {customer} no pueden crear usuarios nuevos desde hace {n} días",
            "{n} usuarios sin permisos de {customer} ven el menú de administración",
        ],
        [
            "0:el rol de administrador perdió el permiso al migrar los roles a grupos",
            "los permisos se guardan en caché durante doce horas",
            "1:el menú se muestra según el rol que guarda el navegador, no el servidor",
        ],
        [
            "0:soporte crea los usuarios a petición",
            "cerrar sesión y volver a entrar para refrescar los permisos",
        ],
    ),
    "la búsqueda de clientes por NIF": _kit(
        "el buscador de clientes",
        [
            "la búsqueda por NIF no encuentra {n} clientes de {customer} con letra final",
            "buscar un NIF con guiones no devuelve resultados en {customer} ({n} quejas)",
        ],
        [
            "0:el NIF se guarda en mayúsculas y la búsqueda distingue mayúsculas",
            "1:el buscador no normaliza guiones ni espacios",
            "0:el índice de NIF no incluye los clientes dados de alta en el último mes",
        ],
        ["buscar por la razón social", "escribir el NIF sin guiones y en mayúsculas"],
    ),
    "el despliegue en Kubernetes": _kit(
        "el clúster",
        [
            "el despliegue de {customer} se queda a medias uno de cada {n} intentos",
            "{n} pods nuevos no arrancan tras el despliegue en el entorno de {customer}",
        ],
        [
            "la sonda de arranque tiene un tiempo de espera de 1 segundo",
            "la imagen se descarga de un registro sin réplica en la región",
            "los secretos se montan después de que arranque el contenedor",
        ],
        [
            "repetir el despliegue con el pipeline manual",
            "subir el tiempo de espera de la sonda a 30 segundos",
        ],
    ),
    "las alertas de monitorización": _kit(
        "la monitorización",
        [
            "las alertas de {customer} llegan {n} veces por la misma incidencia",
            "no saltó ninguna alerta cuando el servicio de {customer} estuvo caído {n} minutos",
        ],
        [
            "0:cada réplica de Prometheus envía su propia alerta",
            "1:la regla compara con el umbral de la versión anterior",
            "1:las alertas se envían a un canal de Slack archivado",
        ],
        ["0:silenciar las alertas duplicadas en Alertmanager", "1:revisar el panel de estado cada mañana"],
    ),
    "la copia de seguridad nocturna": _kit(
        "la copia de seguridad",
        [
            "la copia de seguridad nocturna de {customer} tarda {n} horas",
            "la copia de seguridad de {customer} falló {n} domingos seguidos",
        ],
        [
            "0:se copia la base de datos completa cada noche en lugar de la incremental",
            "1:la copia coincide con el mantenimiento semanal del almacenamiento",
            "1:el volumen de destino se llena porque no se borran las copias antiguas",
        ],
        ["lanzar la copia a mano por la mañana", "1:borrar las copias de más de treinta días"],
    ),
    "la traducción de la interfaz al portugués": _kit(
        "la interfaz",
        [
            "{n} botones salen en inglés para los usuarios de {customer} en Brasil",
            "los textos en portugués se cortan en {n} pantallas de {customer}",
        ],
        [
            "0:las cadenas nuevas no se enviaron a la agencia de traducción",
            "0:el portugués de Brasil y el de Portugal comparten fichero",
            "1:los botones tienen un ancho fijo pensado para el español",
        ],
        ["0:usar la interfaz en español", "1:reducir el tamaño de letra en los ajustes"],
    ),
}

EN_CUSTOMERS = [
    "Northwind",
    "Contoso",
    "Globex",
    "Initech",
    "Umbrella Health",
    "Stark Logistics",
    "Wayne Freight",
    "Acme Retail",
    "Hooli",
    "Vandelay Imports",
    "Soylent Foods",
    "Tyrell Energy",
    "Cyberdyne Labs",
    "Massive Dynamic",
    "Aperture Clinics",
    "Wonka Sweets",
    "Oceanic Airlines",
    "Dunder Paper",
    "Prestige Worldwide",
    "Gekko Capital",
    "Bluth Homes",
    "Sterling Cooper",
    "Pawnee Parks",
    "Krusty Foods",
    "Nakatomi Trading",
    "Monarch Solutions",
    "Virtucon",
    "Duff Brewing",
    "Blue Harbor Bank",
    "Red Cedar Hotels",
    "Silver Lake Schools",
    "Greenfield Farms",
    "Ironbridge Rail",
    "Lakeside Dental",
    "Summit Outdoor",
    "Pioneer Water",
    "Harbor Freightlines",
    "Maple Insurance",
    "Quartz Media",
    "Falcon Couriers",
]
ES_CUSTOMERS = [
    "Transportes Olmedo",
    "Clínica San Rafael",
    "Seguros Almena",
    "Bodegas Lerma",
    "Hoteles Brisa",
    "Farmacias Sol",
    "Construcciones Vega",
    "Banco Meridiano",
    "Distribuciones Nieto",
    "Ferretería Ruiz",
    "Autobuses Arganza",
    "Colegio Montealto",
    "Lácteos Pradera",
    "Energía Cierzo",
    "Talleres Bermejo",
    "Mutua Levante",
    "Ópticas Lince",
    "Panificadora Trigal",
    "Cerámicas Alcora",
    "Viajes Albatros",
    "Muebles Robledo",
    "Conservas Arousa",
    "Editorial Quimera",
    "Logística Tajo",
    "Residencias Alba",
    "Frutas Huerta Viva",
    "Grupo Ancla",
    "Textiles Mirto",
    "Aguas de Riosol",
    "Librerías Atalaya",
]
NUMBERS = [2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 14, 15, 18, 20, 25, 30, 40, 45]
VERSIONS = [f"{major}.{minor}" for major in (3, 4) for minor in range(10)]

# Decisions and blockers: {module}, {customer}, {version}, {manager} are filled in.
EN_DECISIONS = [
    "fix it in {module} for release {version} and not backport it",
    "ship the fix behind a feature flag and turn it on for {customer} first",
    "treat it as top priority because {customer} renews its contract this quarter",
    "rewrite that part of {module} instead of patching it again",
    "add a regression test before anyone touches {module}",
    "roll {module} back to the previous version until the fix is verified",
    "tell {customer} about the workaround and close the ticket once {version} ships",
    "ask the vendor for a patch instead of changing our code",
    "hand the work to the platform team, who own {module}",
    "keep the workaround until {version} and then remove it",
]
ES_DECISIONS = [
    "corregirlo en {module} para la versión {version} sin llevarlo a versiones anteriores",
    "publicar la corrección tras un interruptor de funcionalidad y activarlo primero para {customer}",
    "darle máxima prioridad porque {customer} renueva el contrato este trimestre",
    "reescribir esa parte de {module} en lugar de parchearla otra vez",
    "añadir una prueba de regresión antes de tocar {module}",
    "volver a la versión anterior de {module} hasta verificar la corrección",
    "explicar la solución provisional a {customer} y cerrar la incidencia cuando salga la {version}",
    "pedir un parche al proveedor en lugar de cambiar nuestro código",
]
EN_BLOCKERS = [
    "waiting for {customer} to send logs from an affected device",
    "the vendor has not released the patched library yet",
    "the staging environment is down until the infrastructure team restores it",
    "the security team has to approve any change to {module}",
    "waiting for {customer}'s IT department to grant us test accounts",
    "the database migration of release {version} has to land first",
]
ES_BLOCKERS = [
    "esperando a que {customer} nos envíe los registros de un dispositivo afectado",
    "el proveedor todavía no ha publicado la librería corregida",
    "el entorno de pruebas está caído hasta que infraestructura lo restaure",
    "el equipo de seguridad tiene que aprobar cualquier cambio en {module}",
    "esperando a que el departamento de sistemas de {customer} nos dé cuentas de prueba",
]

# How each part is said: in a comment (by its author) or in the description.
EN_SAY = {
    "cause": [
        "Found it: {x}.",
        "Root cause: {x}.",
        "I traced it with {peer}: {x}.",
        "The logs show the cause: {x}.",
    ],
    "workaround": [
        "Workaround until the fix ships: {x}.",
        "In the meantime, {x}.",
        "Workaround for {customer}: {x}.",
    ],
    "decision": [
        "Decision after talking to {manager}: {x}.",
        "We agreed to {x}.",
        "Decided with {manager}: {x}.",
    ],
}
ES_SAY = {
    "cause": [
        "Encontrado: {x}.",
        "Causa raíz: {x}.",
        "Lo revisé con {peer}: {x}.",
        "Los registros muestran la causa: {x}.",
    ],
    "workaround": [
        "Solución provisional hasta la corrección: {x}.",
        "Mientras tanto, {x}.",
        "Solución provisional para {customer}: {x}.",
    ],
    "decision": [
        "Decisión tras hablar con {manager}: {x}.",
        "Acordamos {x}.",
        "Decidido con {manager}: {x}.",
    ],
}
EN_DESC_SAY = {"cause": "Root cause: {x}.", "workaround": "Workaround: {x}.", "decision": "Decision: {x}."}
ES_DESC_SAY = {
    "cause": "Causa raíz: {x}.",
    "workaround": "Solución provisional: {x}.",
    "decision": "Decisión: {x}.",
}
EN_OUTCOME = {
    "DONE": [
        "Fixed in {version} and deployed; {customer} confirmed it works.",
        "Deployed to production with {version}; verified with {customer}'s data.",
    ],
    "IN_REVIEW": ["The fix is in PR #{pr}, waiting for review from {peer}."],
    "IN_PROGRESS": ["Working on the fix in PR #{pr}; {peer} will test it on staging."],
    "TODO": ["Not started yet; {peer} offered to pair on it.", "Scheduled after the {version} release."],
    "BLOCKED": ["Still blocked: {blocker}."],
}
ES_OUTCOME = {
    "DONE": ["Corregido en la {version} y desplegado; {customer} confirma que funciona."],
    "IN_REVIEW": ["La corrección está en el PR #{pr}, pendiente de revisión de {peer}."],
    "IN_PROGRESS": ["Trabajando en la corrección en el PR #{pr}; {peer} la probará en preproducción."],
    "TODO": [
        "Sin empezar; {peer} se ofreció a hacerlo en pareja.",
        "Previsto después de la versión {version}.",
    ],
    "BLOCKED": ["Sigue bloqueado: {blocker}."],
}
PARTS = ("cause", "workaround", "decision")  # the order a thread tells them in


@dataclass
class Story:
    """One task's free text and what it is made of (the bench's open questions are written from it)."""

    component: str
    customer: str
    symptom: str
    cause: str
    workaround: str
    decision: str
    blocker: str | None
    description: str | None
    comments: list[str] = field(default_factory=list)
    told_by: dict[str, int] = field(default_factory=dict)  # part -> index of the comment that tells it


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


class Teller:
    """Composes every task's story; remembers the symptoms told so no two tasks share one."""

    def __init__(self, seed: int, people: dict[int, str], managers: list[int]) -> None:
        self.seed = seed
        self.people = people
        self.managers = managers
        self.told: set[str] = set()

    def tell(
        self, task: int, component: str, spanish: bool, status: str, has_description: bool, authors: list[int]
    ) -> Story:
        rng = random.Random(f"story-{self.seed}-{task}")
        kit = (ES_KITS if spanish else EN_KITS)[component]
        customers = ES_CUSTOMERS if spanish else EN_CUSTOMERS
        while True:
            customer = rng.choice(customers)
            which = rng.randrange(len(kit.symptoms))
            symptom = kit.symptoms[which].format(customer=customer, n=rng.choice(NUMBERS))
            if symptom not in self.told:
                break
        self.told.add(symptom)
        slots = {
            "customer": customer,
            "module": kit.module,
            "version": rng.choice(VERSIONS),
            "manager": self.people[rng.choice(self.managers)],
            "pr": rng.randint(1200, 4800),
        }
        slots["peer"] = self.people[rng.choice(sorted(set(self.people) - set(authors)))]
        parts = {
            "cause": rng.choice(kit.fitting(kit.causes, which)).format(**slots),
            "workaround": rng.choice(kit.fitting(kit.workarounds, which)).format(**slots),
            "decision": rng.choice(ES_DECISIONS if spanish else EN_DECISIONS).format(**slots),
        }
        blocker = (
            rng.choice(ES_BLOCKERS if spanish else EN_BLOCKERS).format(**slots)
            if status == "BLOCKED"
            else None
        )
        say, desc_say = (ES_SAY, ES_DESC_SAY) if spanish else (EN_SAY, EN_DESC_SAY)
        comments: list[str] = []
        told_by: dict[str, int] = {}
        for i, _author in enumerate(authors):
            if i < len(PARTS):
                part = PARTS[i]
                comments.append(rng.choice(say[part]).format(x=parts[part], **slots))
                told_by[part] = i
            else:
                outcome = (ES_OUTCOME if spanish else EN_OUTCOME)[status]
                comments.append(rng.choice(outcome).format(blocker=blocker, **slots))
        description = None
        if has_description:
            lines = [_sentence(symptom) + "."]
            lines += [desc_say[p].format(x=parts[p]) for p in PARTS if p not in told_by]
            if blocker:
                lines.append(("Bloqueado: " if spanish else "Blocked: ") + blocker + ".")
            description = " ".join(lines)
        return Story(
            component,
            customer,
            symptom,
            parts["cause"],
            parts["workaround"],
            parts["decision"],
            blocker,
            description,
            comments,
            told_by,
        )
