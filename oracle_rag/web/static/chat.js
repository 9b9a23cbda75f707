// oracle-rag chat page. Plain JavaScript, no build step, no third-party code.
// Text from the server is only ever inserted with textContent, never as HTML.
(function () {
  "use strict";

  const body = document.body;
  const API = body.dataset.api || "/api";
  const BASE = (body.dataset.base || "/").replace(/\/?$/, "/");
  const DEMO = body.dataset.demo === "true";
  const TOKEN_KEY = "oracle-rag-token";
  const $ = (id) => document.getElementById(id);

  let conversationId = null;
  let busy = false;
  let lastOpener = null;

  // -- auth ---------------------------------------------------------------------
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
  function setToken(value) {
    if (value) { sessionStorage.setItem(TOKEN_KEY, value); } else { sessionStorage.removeItem(TOKEN_KEY); }
  }
  function headers(json) {
    const h = { "Accept": "application/json" };
    if (json) { h["Content-Type"] = "application/json"; }
    const t = token();
    if (t) { h["Authorization"] = "Bearer " + t; }
    return h;
  }

  async function api(path, options) {
    const opts = Object.assign({ credentials: "same-origin" }, options || {});
    opts.headers = headers(Boolean(opts.body));
    const res = await fetch(API + path, opts);
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (!res.ok) {
      const err = new Error((data && data.error) || ("HTTP " + res.status));
      err.status = res.status;
      err.code = data && data.code;
      throw err;
    }
    return data;
  }

  function setStatus(message) { $("status").textContent = message || ""; }

  // Who the page acts as, and what that identity may see, stay on screen: in
  // demo mode the picker can make anyone a manager, and answers differ by scope.
  function scopeText(me) {
    return me.sees_all ? "sees every record" : "sees their own tasks and the shared sprints and projects";
  }

  async function loadMe() {
    try {
      const me = await api("/me");
      const who = document.createElement("strong");
      who.textContent = (me.name || "employee") + " (#" + me.employee_id + ", " + me.role + ")";
      $("identity").replaceChildren("Signed in as ", who, " \u2014 " + scopeText(me));
      $("token-box").hidden = true;
      return true;
    } catch (e) {
      $("identity").textContent = DEMO ? "Not signed in: choose whom to act as in the demo box" : "Not signed in";
      if (e.status === 401) {
        if (!DEMO) { $("token-box").hidden = false; }
      } else {
        setStatus(e.message);
      }
      return false;
    }
  }

  async function initDemo() {
    const select = $("demo-employee");
    if (!select) { return; }
    const data = await api("/demo/identities");
    for (const who of data.identities) {
      const option = document.createElement("option");
      option.value = who.token;
      option.textContent = who.name + " \u2014 " + who.role + " (#" + who.employee_id + ")";
      select.appendChild(option);
    }
    // No identity until one is chosen (the first option is a placeholder): signing
    // in silently as the first demo employee, an admin, would show everything.
    const current = token();
    if (current && Array.from(select.options).some((o) => o.value === current)) {
      select.value = current;
    } else {
      select.value = "";
      setToken("");
    }
    select.addEventListener("change", async () => {
      setToken(select.value);
      newConversation();
      await refresh();
    });
  }

  async function refresh() {
    if (DEMO && !token()) {  // nobody chosen yet: nothing to ask the server
      $("identity").textContent = "Not signed in: choose whom to act as in the demo box";
      $("conversation-list").replaceChildren();
      return;
    }
    if (await loadMe()) { await loadConversations(); }
  }

  // -- conversations ------------------------------------------------------------
  async function loadConversations() {
    const list = $("conversation-list");
    let data;
    try { data = await api("/conversations"); } catch (e) { list.replaceChildren(); return; }
    list.replaceChildren();
    for (const c of data.conversations) {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "link";
      button.textContent = c.title;
      if (c.id === conversationId) { button.setAttribute("aria-current", "true"); }
      button.addEventListener("click", () => openConversation(c.id));
      li.appendChild(button);
      list.appendChild(li);
    }
  }

  async function openConversation(id) {
    try {
      const data = await api("/conversations/" + encodeURIComponent(id));
      conversationId = id;
      $("messages").replaceChildren();
      for (const m of data.messages) { addMessage(m.role, m.content, m.citations); }
      await loadConversations();
      $("question").focus();
    } catch (e) {
      setStatus(e.message);
    }
  }

  function newConversation() {
    conversationId = null;
    $("messages").replaceChildren();
    $("live").textContent = "";
    setStatus("");
  }

  // -- messages and citations ------------------------------------------------------
  // A record link carries the cited passage (the citation's snippet), so the record opens there.
  function chunkHref(type, id, passage) {
    const href = BASE + "chunk/" + encodeURIComponent(type) + "/" + encodeURIComponent(id);
    return passage ? href + "?passage=" + encodeURIComponent(passage) : href;
  }

  function anchorText(type, id) { return "[" + type + " #" + id + "]"; }
  // One record's key in the maps below (anchors in a text may spell the type in another case).
  function recordKey(type, id) { return String(type).toUpperCase() + " #" + id; }

  // The snippet without a leading copy of the anchor the link already shows ("[TASK #42] [TASK #42] ...").
  function snippetText(c) {
    const anchor = c.anchor || anchorText(c.source_type, c.source_id);
    const text = (c.snippet || "").trim();
    return text.startsWith(anchor) ? text.slice(anchor.length).trim() : text;
  }

  function renderCitations(citations, passages) {
    const wrap = document.createElement("div");
    wrap.className = "citations";
    const heading = document.createElement("h3");
    heading.textContent = citations.length ? "Sources" : "No records cited";
    wrap.appendChild(heading);
    if (!citations.length) { return wrap; }
    const list = document.createElement("ul");
    for (const c of citations) {
      const li = document.createElement("li");
      const link = citationLink(c.source_type, c.source_id, c.anchor || anchorText(c.source_type, c.source_id),
                                passages);
      const snippet = document.createElement("span");
      snippet.className = "snippet";
      snippet.textContent = " " + snippetText(c);
      li.append(link, snippet);
      list.appendChild(li);
    }
    wrap.appendChild(list);
    return wrap;
  }

  // "[TASK #42]" in an answer's text: a link to the record, like the Sources list.
  const ANCHOR = /\[([A-Za-z][A-Za-z0-9_]*) #([^\s,;\[\]]+)\]/g;
  // A numbered record line of a structured answer's text ("3. [TASK #42] Title — BLOCKED · ...").
  const RECORD_LINE = /^\s*\d+\.\s+\[([A-Za-z][A-Za-z0-9_]*) #([^\s\]]+)\]/;

  function citationLink(type, id, label, passages) {
    const passage = (passages && passages.get(recordKey(type, id))) || "";
    const link = document.createElement("a");
    link.className = "citation";
    link.href = chunkHref(type, id, passage);
    link.textContent = label;
    link.addEventListener("click", (event) => {
      if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) { return; }
      event.preventDefault();
      openChunk(type, id, link, passage);
    });
    return link;
  }

  function linkAnchors(text, passages) {
    const nodes = [];
    let last = 0;
    for (const m of text.matchAll(ANCHOR)) {
      if (m.index > last) { nodes.push(document.createTextNode(text.slice(last, m.index))); }
      nodes.push(citationLink(m[1].toUpperCase(), m[2].replace(/[.:)!?]+$/, ""), m[0], passages));
      last = m.index + m[0].length;
    }
    if (last < text.length) { nodes.push(document.createTextNode(text.slice(last))); }
    return nodes;
  }

  // A structured answer's text less the numbered lines (and their indented passages) of the
  // records its table shows: the table is the one view of them.
  function withoutTabledLines(text, tabled) {
    const out = [];
    let dropping = false;
    for (const line of text.split("\n")) {
      const m = line.match(RECORD_LINE);
      if (m) { dropping = tabled.has(recordKey(m[1], m[2])); }
      else if (dropping && !/^\s{2,}\S/.test(line)) { dropping = false; }
      if (!dropping) { out.push(line); }
    }
    return out.join("\n").replace(/\n{3,}/g, "\n\n").trim();
  }

  // Thumbs up/down under a stored answer: POST /api/feedback (docs/chat.md), then say it was recorded.
  function renderFeedback(messageId) {
    const box = document.createElement("div");
    box.className = "feedback";
    const note = document.createElement("span");
    note.className = "feedback-note";
    note.setAttribute("role", "status");
    const buttons = [["up", "\u{1F44D}", "Good answer"], ["down", "\u{1F44E}", "Bad answer"]].map(([rating, icon, label]) => {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = icon;
      b.setAttribute("aria-label", label);
      b.title = label;
      b.addEventListener("click", async () => {
        buttons.forEach((x) => { x.disabled = true; });
        try {
          await api("/feedback", { method: "POST", body: JSON.stringify({ message_id: messageId, rating: rating }) });
          b.setAttribute("aria-pressed", "true");
          note.textContent = "Thanks \u2014 feedback recorded.";
        } catch (err) {
          buttons.forEach((x) => { x.disabled = false; });
          note.textContent = "Feedback not recorded: " + err.message;
        }
      });
      return b;
    });
    box.append(...buttons, note);
    return box;
  }

  function addMessage(role, text, citations, isError, answer) {
    const li = document.createElement("li");
    li.className = "message " + role + (isError ? " error" : "");
    const who = document.createElement("p");
    who.className = "who";
    who.textContent = role === "user" ? "You" : "Assistant";
    const content = document.createElement("div");
    content.className = "content";
    li.append(who, content);
    if (role !== "assistant" || isError) {
      content.textContent = text;
    } else {
      const cited = citations || [];
      const passages = new Map(cited.map((c) => [recordKey(c.source_type, c.source_id), snippetText(c)]));
      const views = window.OracleRagStructured;
      const tabled = answer && views ? views.tabled(answer) : new Set();
      const shown = tabled.size && answer.answerer === "structured" ? withoutTabledLines(text, tabled) : text;
      content.replaceChildren(...linkAnchors(shown, passages));
      const structured = answer && views ? views.render(answer, {
        chunkHref: chunkHref,
        openChunk: (type, id, opener) => openChunk(type, id, opener, passages.get(recordKey(type, id)) || ""),
        passageOf: (type, id) => passages.get(recordKey(type, id)) || "",
        reask: (drop) => { if (!busy) { ask(answer.question, $("mode").value, drop); } },
      }) : null;
      if (structured) { li.appendChild(structured); }
      // records the table shows are not listed again under Sources
      const rest = cited.filter((c) => !tabled.has(recordKey(c.source_type, c.source_id)));
      if (rest.length || !tabled.size) { li.appendChild(renderCitations(rest, passages)); }
      if (answer && answer.message_id) { li.appendChild(renderFeedback(answer.message_id)); }
    }
    $("messages").appendChild(li);
    li.scrollIntoView({ block: "end" });
    return li;
  }

  // -- asking (server-sent events over a fetch body) ----------------------------------
  function parseEvent(raw) {
    let event = "message";
    const data = [];
    for (const line of raw.split("\n")) {
      if (line.startsWith("event:")) { event = line.slice(6).trim(); }
      else if (line.startsWith("data:")) { data.push(line.slice(5).replace(/^ /, "")); }
    }
    return { event: event, data: data.length ? JSON.parse(data.join("\n")) : null };
  }

  async function ask(question, mode, drop) {
    busy = true;
    $("ask-button").disabled = true;
    setStatus("Searching\u2026");
    addMessage("user", question);
    const live = $("live");
    live.textContent = "";
    live.setAttribute("aria-busy", "true");
    let final = null;
    let failure = null;
    let text = "";
    try {
      const payload = { question: question, mode: mode };
      if (conversationId) { payload.conversation_id = conversationId; }
      if (drop && drop.length) { payload.drop_filters = drop; }
      const res = await fetch(API + "/chat/stream", {
        method: "POST", headers: headers(true), body: JSON.stringify(payload), credentials: "same-origin",
      });
      if (!res.ok) {
        let data = null;
        try { data = await res.json(); } catch (e) { data = null; }
        failure = (data && data.error) || ("HTTP " + res.status);
        if (res.status === 401) { await loadMe(); }
      } else {
        setStatus("Answering\u2026");
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const chunk = await reader.read();
          if (chunk.done) { break; }
          buffer += decoder.decode(chunk.value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const message = parseEvent(buffer.slice(0, cut));
            buffer = buffer.slice(cut + 2);
            if (message.event === "meta" && message.data.conversation_id) {
              conversationId = message.data.conversation_id;
            } else if (message.event === "token") {
              text += message.data.text;
              live.textContent = text;
            } else if (message.event === "done") {
              final = message.data;
            } else if (message.event === "error") {
              failure = message.data.error;
            }
          }
        }
      }
    } catch (e) {
      failure = "network error: " + e.message;
    }
    live.setAttribute("aria-busy", "false");
    if (final) {
      live.textContent = "";
      final.question = question;
      addMessage("assistant", final.answer, final.citations, false, final);
      conversationId = final.conversation_id || conversationId;
      setStatus("Answered (" + final.answerer + ", " + final.citations.length + " citation" +
                (final.citations.length === 1 ? "" : "s") + ").");
      await loadConversations();
    } else {
      live.textContent = "";
      addMessage("assistant", "Error: " + (failure || "the answer was interrupted"), [], true);
      setStatus("Error: " + (failure || "the answer was interrupted"));
    }
    busy = false;
    $("ask-button").disabled = false;
    $("question").focus();
  }

  // -- record detail ------------------------------------------------------------------
  // The whole record (a long one's windows joined by the server), opened at the cited passage:
  // the server says where the passage is; it is marked and scrolled into view.
  async function openChunk(type, id, opener, passage) {
    const panel = $("detail");
    const title = $("detail-title");
    const content = $("detail-content");
    let mark = null;
    try {
      const query = passage ? "?passage=" + encodeURIComponent(passage) : "";
      const d = await api("/chunks/" + encodeURIComponent(type) + "/" + encodeURIComponent(id) + query);
      title.textContent = d.anchor;
      if (d.passage) {
        mark = document.createElement("mark");
        mark.id = "detail-passage";
        mark.textContent = d.content.slice(d.passage.start, d.passage.end);
        content.replaceChildren(d.content.slice(0, d.passage.start), mark, d.content.slice(d.passage.end));
      } else {
        content.textContent = d.content;
      }
    } catch (e) {
      title.textContent = anchorText(type, id);
      content.textContent = e.status === 404 ? "This record does not exist, or you may not see it." : e.message;
    }
    lastOpener = opener || null;
    panel.hidden = false;
    panel.parentElement.classList.add("with-detail");
    content.scrollTop = 0;
    if (mark) { content.scrollTop = mark.offsetTop - content.offsetTop - content.clientHeight / 3; }
    title.focus({ preventScroll: true });
  }

  function closeChunk() {
    const panel = $("detail");
    panel.hidden = true;
    panel.parentElement.classList.remove("with-detail");
    if (lastOpener) { lastOpener.focus(); } else { $("question").focus(); }
  }

  // -- wiring ---------------------------------------------------------------------------
  function wire() {
    $("ask-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const question = $("question").value.trim();
      if (!question || busy) { return; }
      $("question").value = "";
      ask(question, $("mode").value);
    });
    $("question").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        $("ask-form").requestSubmit();
      }
    });
    $("token-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      setToken($("token").value.trim());
      $("token").value = "";
      const error = $("token-error");
      error.hidden = true;
      if (!(await loadMe())) {
        setToken("");
        error.textContent = "That token was not accepted: it is unknown, revoked or expired. " +
          "Check it, or create a new one.";
        error.hidden = false;
        $("token").focus();
        return;
      }
      await loadConversations();
    });
    for (const example of document.querySelectorAll("button.example")) {
      example.addEventListener("click", () => {
        const question = example.dataset.question;
        if (busy) { return; }
        if (DEMO && !token()) {  // asked as nobody: say whom to choose, keep the question ready
          $("question").value = question;
          setStatus("Choose whom to act as in the demo box, then press Ask.");
          $("demo-employee").focus();
          return;
        }
        $("question").value = "";
        ask(question, $("mode").value);
      });
    }
    $("new-conversation").addEventListener("click", () => { newConversation(); loadConversations(); $("question").focus(); });
    $("detail-close").addEventListener("click", closeChunk);
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !$("detail").hidden) { closeChunk(); }
    });
  }

  // -- indexing progress (the demo serves while it indexes) -----------------------------
  async function watchIndexing() {
    const line = $("indexing");
    const url = body.dataset.health;
    if (!line || !url) { return; }
    let report = null;
    try {
      const res = await fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" });
      report = await res.json();
    } catch (e) { report = null; }
    const ix = report && report.indexing;
    const sw = report && report.model_switch;
    if (sw && !(ix && !ix.done)) {
      // A model switch: searches use the active model until `oracle-rag model activate` flips.
      const pct = sw.chunks ? Math.floor((100 * sw.embedded) / sw.chunks) : 100;
      line.textContent = sw.done
        ? "Model switch to " + sw.to + ": every chunk embedded; answers use " + sw.from + " until it is activated."
        : "Model switch to " + sw.to + ": " + sw.embedded.toLocaleString() + " of " + sw.chunks.toLocaleString() +
          " chunks embedded (" + pct + "%). Answers use " + sw.from + " meanwhile.";
      line.hidden = false;
      setTimeout(watchIndexing, 5000);
      return;
    }
    if (!ix || ix.done) { line.hidden = true; return; }
    const total = ix.indexed + ix.pending;
    const pct = total ? Math.floor((100 * ix.indexed) / total) : 0;
    line.textContent = "Indexing: " + ix.indexed.toLocaleString() + " records indexed, " +
      ix.pending.toLocaleString() + " to go (" + pct + "%). Answers use what is indexed so far.";
    line.hidden = false;
    setTimeout(watchIndexing, 2000);
  }

  async function start() {
    wire();
    watchIndexing();
    if (DEMO) {
      try { await initDemo(); } catch (e) { setStatus("Demo identities unavailable: " + e.message); }
    }
    await refresh();
    if (body.dataset.chunkType) {
      await openChunk(body.dataset.chunkType, body.dataset.chunkId, null, body.dataset.chunkPassage || "");
    }
    body.dataset.ready = "true";
  }

  start();
})();
