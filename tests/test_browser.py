"""The chat page in Debian's Chromium (headless, driven by Playwright) against a real server.

The server is waitress on 127.0.0.1 over the indexed demo database, in demo
mode with demo tokens; the language model is the scripted HTTP server,
streaming its answer piece by piece. The page's picker chooses a developer,
a question is typed and sent with Enter, the answer is watched arriving in
the live region, the citation is opened in the detail panel, and a
screenshot is saved to ``test-artifacts/chat.png``.

Without /usr/bin/chromium the test fails in CI (``CI=true``) and is skipped
with the reason elsewhere (``apt-get install -y chromium``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from chat_helpers import DEV_A, MANAGER, issue_tokens, rewrite_task, task_chunks_of
from llm_server import Reply, ScriptedLLM

from oracle_rag.answering.chat import LLMClient
from oracle_rag.web import DemoIdentity, create_app
from oracle_rag.web.server import make_server, serve_until

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]

pytestmark = pytest.mark.browser
# The demo box's picker: each identity's option label, and what the identity line then says.
IDENTITIES = {
    MANAGER: ("Manager Three \u2014 manager (#3)", "(#3, manager)"),
    DEV_A: ("Developer Nine \u2014 developer (#9)", "#9, developer"),
}


def _require_chromium() -> None:
    if CHROMIUM.is_file():
        return
    message = f"{CHROMIUM} is missing (install Debian's chromium: apt-get install -y chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + "; the browser test must run in CI")
    pytest.skip(message)


def act_as(page: Page, employee: int) -> None:
    """Choose ``employee`` in the demo box's picker; the identity line then names them."""
    from playwright.sync_api import expect

    label, shown = IDENTITIES[employee]
    page.get_by_label("Act as").select_option(label=label)
    expect(page.locator("#identity")).to_contain_text(shown)


HANG_GUARD_MS = 60_000


@contextmanager
def open_as(
    url: str,
    employee: int | None = None,
    *,
    viewport: dict[str, int] | None = None,
    errors: list[str] | None = None,
    console_errors: bool = True,
) -> Iterator[Page]:
    """Headless Chromium on ``url``, the page ready, acting as ``employee`` (None: nobody picked yet).

    ``errors`` collects uncaught page errors (and console errors with ``console_errors``). The
    browser is closed when the block ends.
    """
    _require_chromium()
    from playwright.sync_api import expect, sync_playwright

    # Playwright's 5 s defaults would bound how fast a loaded machine answers a click: every wait
    # gets a minute-long hang guard instead (what a wait checks is the page's state, not its speed).
    expect.set_options(timeout=HANG_GUARD_MS)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=viewport) if viewport else browser.new_page()
            page.set_default_timeout(HANG_GUARD_MS)
            if errors is not None:
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                if console_errors:
                    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.goto(url)
            expect(page.locator("body[data-ready='true']")).to_be_attached()
            if employee is not None:
                act_as(page, employee)
            yield page
        finally:
            browser.close()


@pytest.fixture
def site(demo_rag, make_settings) -> Iterator[dict]:
    from oracle_rag.system import RagSystem

    rag = RagSystem(make_settings(demo=True), engine=demo_rag.engine)
    tokens = issue_tokens(rag, (MANAGER, DEV_A))
    identities = [
        DemoIdentity(MANAGER, "Manager Three", "manager", tokens[MANAGER]),
        DemoIdentity(DEV_A, "Developer Nine", "developer", tokens[DEV_A]),
    ]
    own = task_chunks_of(rag, DEV_A)[0]
    with ScriptedLLM() as llm:
        settings = rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_timeout_s=20.0)
        app = create_app(
            {
                "ORACLE_RAG_SYSTEM": rag,
                "ORACLE_RAG_LLM": LLMClient(settings),
                "ORACLE_RAG_DEMO_IDENTITIES": identities,
            }
        )
        server = make_server(app, "127.0.0.1", 0, threads=4)
        stop = threading.Event()
        thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
        thread.start()
        try:
            yield {"url": f"http://127.0.0.1:{server.effective_port}/", "llm": llm, "task": own, "rag": rag}
        finally:
            stop.set()
            thread.join(10)


def test_chat_page_streams_an_answer_and_opens_its_citation(site) -> None:
    from playwright.sync_api import expect

    task = site["task"]
    # the model's prose is shown sentence by sentence, once each is checked; each sentence
    # restates what the record says (its title), so its record supports it
    answer = " ".join(
        f"{s} [TASK #{task.task_id}]."
        for s in (
            f"It is about {task.title}",
            f"This one: {task.title}",
            f"See the details of {task.title}",
            f"The record says {task.title}",
        )
    )
    site["llm"].push(Reply(text=answer, piece_delay_s=0.05))
    errors: list[str] = []
    with open_as(site["url"], viewport={"width": 1280, "height": 900}, errors=errors) as page:
        expect(page.get_by_role("heading", name="Demo mode")).to_be_visible()
        # Nobody is signed in until an identity is chosen
        expect(page.locator("#identity")).to_have_text("Not signed in: choose whom to act as in the demo box")
        act_as(page, DEV_A)
        expect(page.locator("#identity")).to_contain_text("sees their own tasks and the shared sprints")
        # record every text the live region shows, to see the answer arrive in pieces
        page.evaluate("""() => {
            window.liveTexts = [];
            new MutationObserver(() => window.liveTexts.push(document.getElementById('live').textContent))
                .observe(document.getElementById('live'), {childList: true, characterData: true, subtree: true});
        }""")
        assert page.locator("#live").get_attribute("aria-live") == "polite"
        question = page.get_by_label("Your question")
        question.fill(task.title)
        question.press("Enter")
        reply = page.locator("#messages .message.assistant").last
        # the model's checked prose, then the records in their own words
        expect(reply.locator(".content")).to_contain_text(answer, timeout=60_000)
        partial = [t for t in page.evaluate("window.liveTexts") if t and not t.startswith(answer)]
        assert len(partial) >= 3 and all(answer.startswith(t) for t in partial), partial
        citation = reply.locator(".citations").get_by_role("link", name=f"[TASK #{task.task_id}]")
        expect(citation).to_be_visible()
        # The anchor inside the answer text is a link too, and a Sources line names it once
        inline = reply.locator(".content").get_by_role("link", name=f"[TASK #{task.task_id}]").first
        # The link opens the record at the cited passage, in a new tab too
        expect(inline).to_have_attribute("href", re.compile(rf"^/chunk/TASK/{task.task_id}\?passage=\S+"))
        source_line = reply.locator(".citations li").first
        expect(source_line).to_contain_text(task.title)
        assert source_line.inner_text().count(f"[TASK #{task.task_id}]") == 1, source_line.inner_text()
        expect(page.locator("#conversation-list li")).to_have_count(1)
        citation.click()
        detail = page.get_by_role("complementary")
        expect(detail).to_be_visible()
        expect(page.locator("#detail-content")).to_contain_text(task.title)
        expect(page.locator("#detail-title")).to_be_focused()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "chat.png"), full_page=True)
        page.keyboard.press("Escape")
        expect(detail).to_be_hidden()
        expect(citation).to_be_focused()
        assert errors == []
    prompt = site["llm"].requests[0]
    assert len(site["llm"].requests) == 1
    assert f'<chunk id="TASK #{task.task_id}">' in prompt.last_user
    assert (ARTIFACTS / "chat.png").stat().st_size > 10_000


def _serve(app) -> tuple[str, threading.Event, threading.Thread]:
    server = make_server(app, "127.0.0.1", 0, threads=4)
    stop = threading.Event()
    thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
    thread.start()
    return f"http://127.0.0.1:{server.effective_port}/", stop, thread


def test_inline_anchor_opens_the_record_and_indexing_progress_shows(site) -> None:
    """An anchor in the answer's text opens the record; queued rows show an indexing line."""
    from playwright.sync_api import expect

    task = site["task"]
    rag = site["rag"]
    with rag.engine.begin() as conn:  # work for the index, with no worker running yet
        for source_id in range(1, 6):
            rag.enqueue(conn, "SPRINT", source_id)
    site["llm"].push(Reply(text=f"Start with [TASK #{task.task_id}]."))
    with open_as(site["url"]) as page:
        indexing = page.locator("#indexing")
        expect(indexing).to_be_visible()
        expect(indexing).to_contain_text("5 to go")
        expect(indexing).to_contain_text("Answers use what is indexed so far.")
        act_as(page, MANAGER)
        expect(page.locator("#identity")).to_contain_text("(#3, manager) \u2014 sees every record")
        question = page.get_by_label("Your question")
        question.fill(f"where do I start with {task.title}?")  # the task is among the passages given
        question.press("Enter")
        # the model's anchor, then the record in its own words under it
        inline = (
            page.locator("#messages .message.assistant .content")
            .get_by_role("link", name=f"[TASK #{task.task_id}]")
            .first
        )
        expect(inline).to_be_visible(timeout=60_000)
        inline.click()
        expect(page.locator("#detail-content")).to_contain_text(task.title)
        rag.worker().drain()  # the index catches up: the line goes away by itself
        expect(indexing).to_be_hidden(timeout=120_000)


def test_wrong_token_says_so(demo_rag, make_settings) -> None:
    """A token that is not accepted shows a message instead of clearing the field silently."""
    from playwright.sync_api import expect

    from oracle_rag.system import RagSystem

    rag = RagSystem(make_settings(), engine=demo_rag.engine)
    good = issue_tokens(rag, (DEV_A,))[DEV_A]
    url, stop, thread = _serve(create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None}))
    try:
        with open_as(url) as page:
            token = page.get_by_label("API token")
            token.fill("orag_not-a-real-token")
            page.get_by_role("button", name="Use token").click()
            error = page.get_by_role("alert")
            expect(error).to_have_text(
                "That token was not accepted: it is unknown, revoked or expired. "
                "Check it, or create a new one."
            )
            expect(page.locator("#identity")).to_have_text("Not signed in")
            expect(token).to_be_focused()
            token.fill(good)
            page.get_by_role("button", name="Use token").click()
            expect(page.locator("#identity")).to_contain_text("#9, developer")
            expect(error).to_be_hidden()
            expect(page.locator("#token-box")).to_be_hidden()
    finally:
        stop.set()
        thread.join(10)


@pytest.fixture
def plain_site(demo_rag, make_settings) -> Iterator[dict]:
    """The page over the demo database with no language model: structured answers are computed in SQL."""
    from oracle_rag.system import RagSystem

    rag = RagSystem(make_settings(demo=True), engine=demo_rag.engine)
    tokens = issue_tokens(rag, (MANAGER,))
    app = create_app(
        {
            "ORACLE_RAG_SYSTEM": rag,
            "ORACLE_RAG_LLM": None,
            "ORACLE_RAG_DEMO_IDENTITIES": [
                DemoIdentity(MANAGER, "Manager Three", "manager", tokens[MANAGER])
            ],
        }
    )
    url, stop, thread = _serve(app)
    try:
        yield {"url": url, "rag": rag}
    finally:
        stop.set()
        thread.join(10)


def test_structured_answers_show_chips_a_table_and_a_bar_chart(plain_site) -> None:
    """A filter list is a table with removable filter chips; a per-group count is an inline SVG bar chart."""
    import sqlalchemy as sa
    from playwright.sync_api import expect

    with plain_site["rag"].engine.connect() as conn:
        statuses = dict(conn.execute(sa.text("SELECT STATUS, COUNT(*) FROM TASK GROUP BY STATUS")).fetchall())
        blocked = conn.execute(sa.text("SELECT COUNT(*) FROM TASK WHERE STATUS = 'BLOCKED'")).scalar_one()
    errors: list[str] = []
    with open_as(plain_site["url"], MANAGER, viewport={"width": 1280, "height": 1000}, errors=errors) as page:
        question = page.get_by_label("Your question")
        question.fill("what is blocked in the current sprint?")
        question.press("Enter")
        first = page.locator("#messages .message.assistant").nth(0)
        expect(first.locator(".chip")).to_have_count(2, timeout=60_000)
        expect(first.locator(".chip").nth(0)).to_contain_text("status: BLOCKED")
        expect(first.locator(".chip").nth(1)).to_contain_text("sprint status: ACTIVE")
        rows = first.locator("table.records tbody tr")
        expect(rows.first).to_be_visible()
        # The table is the one view of the records (not the text, not Sources again)
        expect(first.locator(".citations")).to_have_count(0)
        anchors = first.locator("table.records tbody tr td:first-child").all_text_contents()
        text = first.inner_text()
        assert anchors and all(text.count(a) == 1 for a in anchors), text
        headers = first.locator("table.records thead th").all_text_contents()
        assert (
            headers[:4] == ["record", "title", "status", "priority"]
            and "assignee" in headers
            and "due" in headers
        )
        assert set(first.locator("table.records tbody tr td:nth-child(3)").all_text_contents()) == {"BLOCKED"}
        # remove the sprint filter: the question is asked again without it
        first.get_by_role("button", name="Remove filter sprint status: ACTIVE").click()
        second = page.locator("#messages .message.assistant").nth(1)
        expect(second.locator(".chip")).to_have_count(1, timeout=60_000)
        expect(second.locator(".content")).to_contain_text(f"{blocked} tasks match status: BLOCKED")
        expect(second.locator("table.records tbody tr")).to_have_count(min(blocked, 20))
        expect(second.get_by_role("button", name="restore all filters")).to_be_visible()
        question.fill("how many tasks per status?")
        question.press("Enter")
        third = page.locator("#messages .message.assistant").nth(2)
        chart = third.locator("svg.chart")
        expect(chart).to_be_visible(timeout=60_000)
        expect(chart.locator("rect.bar-rect")).to_have_count(len(statuses))
        labels = chart.locator("text.bar-label").all_text_contents()
        values = [int(v) for v in chart.locator("text.bar-value").all_text_contents()]
        assert dict(zip(labels, values, strict=True)) == statuses
        widths = [
            float(w)
            for w in chart.locator("rect.bar-rect").evaluate_all(
                "els => els.map(e => e.getAttribute('width'))"
            )
        ]
        assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "structured.png"), full_page=True)
        assert errors == []


def test_example_questions_on_the_first_screen_are_asked_when_clicked(plain_site) -> None:
    """Demo mode: example questions, structured and open, fit the first screen; a click asks one as the
    employee picked (before anyone is picked it waits in the question box), and the open one is answered
    by the sentence of its task that answers it."""
    from playwright.sync_api import expect

    from oracle_rag.demo.questions import (
        EXAMPLES,
        OPEN_EXAMPLES,
        STRUCTURED_EXAMPLES,
        open_questions,
    )

    example = OPEN_EXAMPLES[0]
    wanted = next(q for q in open_questions() if q.question == example)
    errors: list[str] = []
    with open_as(plain_site["url"], viewport={"width": 1280, "height": 720}, errors=errors) as page:
        buttons = page.locator("#examples button.example")
        assert buttons.all_text_contents() == list(EXAMPLES) and 4 <= len(EXAMPLES) <= 6
        for i in range(len(EXAMPLES)):
            expect(buttons.nth(i)).to_be_in_viewport()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "examples.png"))  # the first screen
        page.get_by_role("button", name=example).click()
        expect(page.get_by_label("Your question")).to_have_value(example)
        expect(page.locator("#status")).to_contain_text("Choose whom to act as")
        expect(page.locator("#messages .message")).to_have_count(0)
        act_as(page, MANAGER)
        page.get_by_role("button", name=example).click()
        expect(page.get_by_label("Your question")).to_have_value("")
        first = page.locator("#messages .message.assistant").nth(0)
        expect(first.locator(".content")).to_contain_text(wanted.facts[0], timeout=60_000)
        expect(first).to_contain_text(f"TASK #{wanted.task}")
        page.get_by_role("button", name=STRUCTURED_EXAMPLES[1]).click()  # a count per project: a bar chart
        expect(page.locator("#messages .message.assistant").nth(1).locator("svg.chart")).to_be_visible(
            timeout=60_000
        )
        page.screenshot(path=str(ARTIFACTS / "examples-answered.png"), full_page=True)
        assert errors == []


# What the page measures of itself: the answer column, every record anchor shown in a
# message (table links, inline links, Sources links), and every table cell whose text wraps.
LAYOUT = """() => {
    const main = document.querySelector("main.chat").getBoundingClientRect();
    const messages = Array.from(document.querySelectorAll("#messages .message.assistant")).map((m) => ({
        anchors: Array.from(m.querySelectorAll("a.citation")).map((a) => a.textContent),
        sources: Array.from(m.querySelectorAll(".citations li")).map((li) => li.textContent),
    }));
    const wrapped = [];
    for (const td of document.querySelectorAll("table.records td:not(.title)")) {
        const range = document.createRange();
        range.selectNodeContents(td);
        const lines = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
        if (lines.size > 1) { wrapped.push(td.textContent); }
    }
    return {viewport: window.innerWidth, column: main.width, messages: messages, wrapped: wrapped,
            due: Array.from(document.querySelectorAll("table.records td")).filter(
                (td) => /^\\d{4}-\\d{2}-\\d{2}$/.test(td.textContent)).length};
}"""


def test_a_list_answer_shows_its_records_once_in_a_wide_column(plain_site, tmp_path: Path) -> None:
    """At 1280 px the answer column uses the screen, each record appears once (the table),
    no Sources line repeats its anchor, and no date wraps; a screenshot is kept for a look."""
    from playwright.sync_api import expect

    errors: list[str] = []
    with open_as(
        plain_site["url"],
        MANAGER,
        viewport={"width": 1280, "height": 900},
        errors=errors,
        console_errors=False,
    ) as page:
        question = page.get_by_label("Your question")
        question.fill("which tasks are in progress?")
        question.press("Enter")
        answer = page.locator("#messages .message.assistant").last
        expect(answer.locator("table.records tbody tr").first).to_be_visible(timeout=60_000)
        expect(page.locator("#detail")).to_be_hidden()  # the record panel only once a record is opened
        shot = tmp_path / "list-answer-1280.png"
        page.screenshot(path=str(shot), full_page=True)
        layout = page.evaluate(LAYOUT)
        assert errors == []
    assert shot.stat().st_size > 10_000
    assert layout["viewport"] == 1280 and layout["column"] >= 0.7 * 1280, layout["column"]
    (listed,) = layout["messages"]
    assert len(listed["anchors"]) >= 10  # a list answer's records...
    assert len(listed["anchors"]) == len(set(listed["anchors"])), listed["anchors"]  # ...each shown once
    assert all(line.count("[") == 1 for line in listed["sources"]), listed["sources"]  # no anchor twice
    assert layout["due"] >= 1 and layout["wrapped"] == [], layout["wrapped"]


SENTENCES = [f"Comment {n:03d}: the retry queue drained batch {n} after the failover." for n in range(1, 121)]


def test_a_long_record_opens_whole_at_the_cited_passage(site, tmp_path: Path) -> None:
    """The side panel shows every window of a long record, the cited passage marked and in view."""
    from playwright.sync_api import expect

    task = site["task"]
    rewrite_task(site["rag"], task.task_id, description="\n".join(SENTENCES))
    site["llm"].push(Reply(text=f"Batch 117 is noted in [TASK #{task.task_id}]."))
    with open_as(site["url"], DEV_A, viewport={"width": 1280, "height": 900}) as page:
        question = page.get_by_label("Your question")
        question.fill("which comment says the retry queue drained batch 117 after the failover?")
        question.press("Enter")
        source = page.locator("#messages .message.assistant .citations").get_by_role(
            "link", name=f"[TASK #{task.task_id}]"
        )
        expect(source).to_be_visible(timeout=60_000)
        assert "passage=" in (source.get_attribute("href") or "")
        cited = page.locator("#messages .message.assistant .citations .snippet").first.inner_text()
        source.click()
        content = page.locator("#detail-content")
        expect(content).to_contain_text("Comment 001:")
        text = content.inner_text()
        assert all(text.count(s) == 1 for s in SENTENCES)  # whole, the overlaps once
        mark = page.locator("#detail-passage")
        expect(mark).to_contain_text("Comment 117")
        assert " ".join(mark.inner_text().split()) == " ".join(cited.replace("\u2026", " ").split())
        # scrolled to it: the mark is inside the panel's visible box, the record's start is not
        box, seen = mark.bounding_box(), content.bounding_box()
        assert (
            box and seen and seen["y"] <= box["y"] and box["y"] + box["height"] <= seen["y"] + seen["height"]
        )
        assert content.evaluate("el => el.scrollTop") > 0
        # the chat column makes room for the panel, which stays beside it
        assert page.locator("main.chat").bounding_box()["width"] >= 0.4 * 1280
        page.screenshot(path=str(tmp_path / "record-panel-1280.png"))
        # the link's own page (a new tab, same sign-in) opens at the same passage
        page.goto(site["url"].rstrip("/") + (source.get_attribute("href") or ""))
        expect(page.locator("body[data-ready='true']")).to_be_attached()
        expect(page.locator("#detail-passage")).to_contain_text("Comment 117")


def test_thumbs_down_under_an_answer_records_feedback(plain_site) -> None:
    """One click on a thumb posts /api/feedback; the page says so and the row is in RAG_FEEDBACK."""
    from playwright.sync_api import expect

    from oracle_rag.answering.chat.feedback import FeedbackStore

    with open_as(plain_site["url"], MANAGER, viewport={"width": 1280, "height": 1000}) as page:
        question = page.get_by_label("Your question")
        question.fill("what is blocked in the current sprint?")
        question.press("Enter")
        answer = page.locator("#messages .message.assistant").last
        answer.get_by_role("button", name="Bad answer").click(timeout=60_000)
        expect(answer.locator(".feedback-note")).to_have_text("Thanks \u2014 feedback recorded.")
    [row] = FeedbackStore(plain_site["rag"].engine).list()
    assert (row.caller_id, row.rating, row.question) == (
        MANAGER,
        -1,
        "what is blocked in the current sprint?",
    )
