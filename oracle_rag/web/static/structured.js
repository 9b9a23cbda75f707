// oracle-rag chat page: the structured part of an answer (issue 15).
// What the question was understood to ask, as chips the user can remove (the question is asked
// again without that filter); a list answer as a table; a per-group count as an inline SVG bar chart.
// Plain JavaScript, no third-party code; server text is only ever inserted with textContent.
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const key of Object.keys(attrs || {})) { node.setAttribute(key, String(attrs[key])); }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function chips(data, handlers) {
    const wrap = el("div", "chips");
    wrap.setAttribute("role", "group");
    wrap.setAttribute("aria-label", "Filters applied");
    const label = el("span", "chips-label", "Filters:");
    wrap.appendChild(label);
    for (const f of data.filters) {
      const chip = el("span", "chip");
      chip.dataset.key = f.key;
      chip.appendChild(el("span", "chip-text", f.label));
      const remove = el("button", "chip-remove", "\u00d7");
      remove.type = "button";
      remove.setAttribute("aria-label", "Remove filter " + f.label);
      remove.title = "Ask again without this filter";
      remove.addEventListener("click", () => handlers.reask(data.dropped.concat([f.key])));
      chip.appendChild(remove);
      wrap.appendChild(chip);
    }
    if (data.dropped.length) {
      const restore = el("button", "link chips-restore", "restore all filters");
      restore.type = "button";
      restore.addEventListener("click", () => handlers.reask([]));
      wrap.appendChild(restore);
    }
    return wrap;
  }

  function table(data, handlers) {
    const wrap = el("div", "records-wrap");
    const t = el("table", "records");
    const caption = el("caption", "", (data.total === null ? data.records.length : data.total) + " matching, " +
                       data.records.length + " shown");
    t.appendChild(caption);
    const head = el("tr");
    for (const name of ["record", "title"].concat(data.columns)) {
      const th = el("th", "", name);
      th.scope = "col";
      head.appendChild(th);
    }
    const thead = el("thead");
    thead.appendChild(head);
    t.appendChild(thead);
    const body = el("tbody");
    for (const r of data.records) {
      const row = el("tr");
      const cell = el("td");
      const link = el("a", "citation", r.anchor);
      link.href = handlers.chunkHref(r.source_type, r.source_id);
      link.addEventListener("click", (event) => {
        if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) { return; }
        event.preventDefault();
        handlers.openChunk(r.source_type, r.source_id, link);
      });
      cell.appendChild(link);
      row.appendChild(cell);
      const title = el("td", "title", r.title);
      // ranked by a topic: the passage that matched it, under the title (the citation's snippet)
      const passage = data.topic && handlers.passageOf ? handlers.passageOf(r.source_type, r.source_id) : "";
      if (passage) { title.appendChild(el("span", "passage", passage)); }
      row.appendChild(title);
      for (const name of data.columns) {
        row.appendChild(el("td", "", (r.values && r.values[name]) || "-"));
      }
      body.appendChild(row);
    }
    t.appendChild(body);
    wrap.appendChild(t);
    return wrap;
  }

  function chart(groups) {
    const rows = groups.rows;
    const barHeight = 22;
    const gap = 6;
    const labelWidth = 190;
    const width = 560;
    const height = rows.length * (barHeight + gap) + gap;
    const max = Math.max(1, ...rows.map((r) => r.count));
    const title = "Count per " + groups.label;
    const root = svg("svg", { class: "chart", role: "img", width: width, height: height,
                              viewBox: "0 0 " + width + " " + height, "aria-label": title });
    root.appendChild(svg("title", {}, title));
    rows.forEach((r, i) => {
      const y = gap + i * (barHeight + gap);
      const g = svg("g", { class: "bar" });
      g.appendChild(svg("text", { x: labelWidth - 8, y: y + barHeight * 0.7, "text-anchor": "end",
                                  class: "bar-label" }, r.label));
      const w = Math.max(2, Math.round((width - labelWidth - 60) * r.count / max));
      g.appendChild(svg("rect", { x: labelWidth, y: y, width: w, height: barHeight, rx: 3, class: "bar-rect" }));
      g.appendChild(svg("text", { x: labelWidth + w + 6, y: y + barHeight * 0.7, class: "bar-value" },
                        String(r.count)));
      root.appendChild(g);
    });
    return root;
  }

  // The structured view of an answer, or null when there is nothing structured to show.
  function render(answer, handlers) {
    const data = answer && answer.structured;
    if (!data) { return null; }
    const wrap = el("div", "structured");
    wrap.dataset.kind = data.kind;
    if (data.filters.length || data.dropped.length) { wrap.appendChild(chips(data, handlers)); }
    if (data.groups && data.groups.rows.length) { wrap.appendChild(chart(data.groups)); }
    if (data.kind === "list" && data.records.length) { wrap.appendChild(table(data, handlers)); }
    return wrap.childNodes.length ? wrap : null;
  }

  // "TYPE #id" of the records the table shows: the page lists them there only (not again in the
  // answer's text or under Sources).
  function tabled(answer) {
    const data = answer && answer.structured;
    if (!data || data.kind !== "list") { return new Set(); }
    return new Set(data.records.map((r) => String(r.source_type).toUpperCase() + " #" + r.source_id));
  }

  window.OracleRagStructured = { render: render, tabled: tabled };
})();
