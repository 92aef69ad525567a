// StoreInspector: segments, topics/queues, a paged record browser and lookups over one store.
// DOM contract: root data-testid="store-inspector"; record rows data-testid="record-row" (data-offset,
// data-kind); lookup input data-testid="lookup", button data-testid="lookup-go"; result text
// data-testid="lookup-result"; paging buttons "page-first", "page-prev", "page-next", "page-last";
// topics table rows data-testid="queue-row"; the segments are SegmentView bars (data-testid="segment"),
// the selected record a RecordView (data-testid="record-view", "byte", "field").
import { h, fmtInt, fmtBytes, big, clear, isStatic, toBytes } from "./_util.js";
import { mountSegments } from "./segment_view.js";
import { mountRecord } from "./record_view.js";

const TIMEOUT_MS = 20000;

function render({ model, el }) {
  const root = h("div", { class: "rmq-view rmq-insp", "data-testid": "store-inspector" });
  el.appendChild(root);
  const offline = isStatic(model);

  // -- requests to the kernel (custom messages), with answers from the state when there is none --
  let seq = 0;
  const pending = new Map();
  const onCustom = (msg, buffers) => {
    if (!msg || !msg.id || !pending.has(msg.id)) return;
    const p = pending.get(msg.id);
    pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.error) p.reject(new Error(msg.error));
    else p.resolve([msg, buffers || []]);
  };
  model.on("msg:custom", onCustom);

  function ask(content) {
    if (offline || typeof model.send !== "function") return Promise.reject(new Error("static page: no kernel"));
    const id = `q${++seq}-${Date.now()}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { pending.delete(id); reject(new Error("no answer from the kernel (is it running?)")); }, TIMEOUT_MS);
      pending.set(id, { resolve, reject, timer });
      try { model.send({ ...content, id }); } catch (e) { clearTimeout(timer); pending.delete(id); reject(e); }
    });
  }

  const embeddedPages = () => model.get("embedded_pages") || [];
  function staticPage(start) {
    const pages = embeddedPages();
    if (start === null || start === undefined) return pages[0] || null;
    return pages.find((p) => p.start === String(start)) || null;
  }
  function staticPageBefore(end) {
    const pages = embeddedPages();
    if (end === null || end === undefined) return pages.length ? pages[pages.length - 1] : null;
    return pages.find((p) => p.next === String(end)) || null;
  }
  function staticRecord(offset) {
    const d = (model.get("embedded_details") || []).find((x) => x.offset === String(offset));
    if (!d) return null;
    const all = toBytes(model.get("embedded_bytes"));
    return { ...d, data: all.slice(d.data_range[0], d.data_range[1]) };
  }

  // -- skeleton ----------------------------------------------------------------------------
  const head = h("div", { class: "rmq-insp-head" });
  const segBox = h("div", { class: "rmq-insp-segs" });
  const queueTable = h("table", { class: "rmq-insp-queues" });
  const status = h("div", { class: "rmq-insp-status", "data-testid": "lookup-result" });
  const lookup = h("input", { type: "text", "data-testid": "lookup", class: "rmq-insp-lookup rmq-mono", placeholder: "msgId, physical offset, key or topic#key", spellcheck: "false" });
  const goBtn = h("button", { "data-testid": "lookup-go", text: "find" });
  const btnFirst = h("button", { "data-testid": "page-first", title: "first page", text: "|◀ first" });
  const btnPrev = h("button", { "data-testid": "page-prev", title: "previous page", text: "◀ prev" });
  const btnNext = h("button", { "data-testid": "page-next", title: "next page", text: "next ▶" });
  const btnLast = h("button", { "data-testid": "page-last", title: "last page", text: "last ▶|" });
  const pageLabel = h("span", { class: "rmq-insp-pagelabel rmq-muted", "data-testid": "page-label" });
  const recTable = h("table", { class: "rmq-insp-records" });
  const recBody = h("tbody");
  const recColumns = [["offset", "offset"], ["size", "size"], ["topic", "topic"], ["queue", "queue"], ["queue offset", "qoffset"],
    ["store time", "time"], ["keys", "keys"], ["tags", "tags"], ["body / note", "body"]];
  recTable.append(h("colgroup", {}, recColumns.map(([, c]) => h("col", { class: `rmq-insp-c-${c}` }))),
    h("thead", {}, h("tr", {}, recColumns.map(([t]) => h("th", { text: t, title: t })))), recBody);
  const detail = h("div", { class: "rmq-insp-detail" });

  root.append(
    head,
    h("details", { class: "rmq-insp-sec", open: true }, h("summary", { text: "Segments" }), segBox),
    h("details", { class: "rmq-insp-sec", open: true }, h("summary", { text: "Topics and queues" }), h("div", { class: "rmq-insp-qwrap" }, queueTable)),
    h("details", { class: "rmq-insp-sec", open: true }, h("summary", { text: "Records" }),
      h("div", { class: "rmq-insp-toolbar" }, btnFirst, btnPrev, btnNext, btnLast, pageLabel),
      h("div", { class: "rmq-insp-toolbar" }, lookup, goBtn),
      status,
      h("div", { class: "rmq-insp-recwrap" }, recTable),
      detail));

  // segments: SegmentView's own drawing over the seg_* part of the state
  const segModel = {
    get(k) {
      if (k === "title") return "commitlog";
      if (k === "live") return false;
      return model.get(`seg_${k}`);
    },
  };
  const segs = mountSegments(segBox, segModel, {
    onRowClick(row) {
      if (row.group !== 0) return;
      history = [];
      loadPage(row.from.toString(), "segment");
    },
  });

  function renderHead() {
    clear(head);
    const s = model.get("summary") || {};
    const open = s.open || {};
    head.append(
      h("div", { class: "rmq-insp-title" }, h("b", { text: model.get("title") || "store" }), " ", h("span", { class: "rmq-muted rmq-mono", text: model.get("root") || "" })),
      h("div", { class: "rmq-insp-sum", "data-testid": "store-summary" },
        `${fmtInt(s.segments || 0)} segments of ${fmtBytes(s.file_size || 0)} · log ${fmtInt(s.min_offset || 0)} – ${fmtInt(s.end || 0)}` +
        ` · ${fmtInt(s.messages_in_queues || 0)} messages in ${fmtInt(s.queues || 0)} queues of ${fmtInt(s.topics || 0)} topics` +
        ` · ${fmtInt(s.index_files || 0)} index files (${fmtInt(s.index_entries || 0)} entries)` +
        (open.source ? ` · end of log from ${open.source}${open.walked_records !== undefined ? ` (+${fmtInt(open.walked_records)} records walked)` : ""}` : "") +
        (offline ? " · static page" : "")));
  }

  function renderQueues() {
    clear(queueTable);
    const rows = model.get("queues") || [];
    queueTable.appendChild(h("thead", {}, h("tr", {}, ["topic", "queue", "min", "max", "messages", "ends at offset", "files"].map((c) => h("th", { text: c })))));
    const body = h("tbody");
    if (!rows.length) body.appendChild(h("tr", {}, h("td", { colspan: "7", class: "rmq-muted", text: "no consume queues (nothing dispatched)" })));
    for (const q of rows) {
      body.appendChild(h("tr", {
        "data-testid": "queue-row", "data-topic": q.topic, "data-queue": q.queue_id, title: "browse this queue",
        onclick: () => loadQueue(q.topic, q.queue_id, q.min),
      },
      h("td", { class: "rmq-insp-topic", title: q.topic, text: q.topic }), h("td", { class: "rmq-num", text: String(q.queue_id) }),
      h("td", { class: "rmq-num", text: fmtInt(q.min) }), h("td", { class: "rmq-num", text: fmtInt(q.max) }),
      h("td", { class: "rmq-num", text: fmtInt(q.count) }), h("td", { class: "rmq-num", text: fmtInt(q.max_physic_offset) }),
      h("td", { class: "rmq-num", text: String(q.files) })));
    }
    queueTable.appendChild(body);
  }

  // -- records -------------------------------------------------------------------------------
  let page = model.get("page") || { rows: [] };
  let history = [];
  let selected = model.get("selected") || "";
  let recView = null;

  function setStatus(text, bad = false) {
    status.textContent = text || "";
    status.classList.toggle("rmq-bad", bad);
  }

  function renderPage() {
    clear(recBody);
    const rows = page.rows || [];
    for (const r of rows) {
      const tr = h("tr", {
        "data-testid": "record-row", "data-offset": r.offset, "data-kind": r.kind, "data-msg-id": r.msg_id || null,
        class: `rmq-insp-${r.kind}` + (r.offset === selected ? " selected" : ""), title: r.msg_id ? `msgId ${r.msg_id}` : r.note || "",
        onclick: () => select(r.offset),
      },
      h("td", { class: "rmq-num rmq-mono", text: fmtInt(r.offset) }),
      h("td", { class: "rmq-num", text: fmtInt(r.size) }),
      h("td", { class: "rmq-insp-topic", title: r.topic || "", text: r.topic || (r.kind === "blank" ? "(blank)" : r.kind) }),
      h("td", { class: "rmq-num", text: r.queue_id >= 0 ? String(r.queue_id) : "" }),
      h("td", { class: "rmq-num", text: r.queue_offset ? fmtInt(r.queue_offset) : "" }),
      h("td", { class: "rmq-mono rmq-insp-time", text: r.store_time || "" }),
      h("td", { class: "rmq-mono", text: r.keys || "", title: r.keys || "" }),
      h("td", { text: r.tags || "", title: r.tags || "" }),
      h("td", { class: "rmq-insp-body", title: [r.body, r.note].filter(Boolean).join(" ") }, h("span", { class: "rmq-mono", text: r.body || "" }), r.note ? h("span", { class: "rmq-muted", text: ` ${r.note}` }) : null));
      recBody.appendChild(tr);
    }
    if (!rows.length) recBody.appendChild(h("tr", {}, h("td", { colspan: "9", class: "rmq-muted", text: "no records here" })));
    const first = rows[0];
    const last = rows[rows.length - 1];
    const what = page.mode === "queue" ? `queue ${page.topic}/${page.queue_id} from queue offset ${fmtInt(page.start)}` :
      page.mode === "lookup" ? `lookup “${page.query}”` : `log from offset ${fmtInt(page.start)}`;
    pageLabel.textContent = `${what}: ${rows.length} record${rows.length === 1 ? "" : "s"}` +
      (first && last ? ` (${fmtInt(first.offset)} – ${fmtInt(big(last.offset) + BigInt(last.size || 0))})` : "");
    btnNext.disabled = !page.next;
    btnPrev.disabled = page.mode === "lookup" || (page.mode === "queue" ? !history.length : (!history.length && (!page.start || page.start === (model.get("summary") || {}).min_offset)));
  }

  async function loadPage(start, why, from) {
    setStatus("loading…");
    try {
      let p = null;
      if (offline) p = staticPage(start);
      else {
        try { p = (await ask({ kind: "page", start, count: model.get("page_size") }))[0].page; } catch (e) { p = staticPage(start); if (!p) throw e; }
      }
      if (!p) throw new Error("this page is not embedded in the static HTML (a live kernel answers any page)");
      if (from !== undefined) history.push(from);
      page = p;
      renderPage();
      setStatus(why === "segment" ? `segment ${start.padStart(20, "0")}` : "");
    } catch (e) { setStatus(String(e.message || e), true); }
  }

  async function loadPageBefore(end) {
    setStatus("loading…");
    try {
      let p = null;
      if (offline) p = staticPageBefore(end);
      else {
        try { p = (await ask({ kind: "page_before", end, count: model.get("page_size") }))[0].page; } catch (e) { p = staticPageBefore(end); if (!p) throw e; }
      }
      if (!p) throw new Error("that page is not embedded in the static HTML (a live kernel answers any page)");
      page = p;
      renderPage();
      setStatus("");
    } catch (e) { setStatus(String(e.message || e), true); }
  }

  async function loadQueue(topic, queueId, start, from) {
    setStatus("loading…");
    try {
      const [msg] = await ask({ kind: "queue_page", topic, queue_id: queueId, start, count: model.get("page_size") });
      if (page.mode !== "queue" || page.topic !== topic || page.queue_id !== queueId) history = [];
      if (from !== undefined) history.push(from);
      page = msg.page;
      renderPage();
      setStatus(msg.page.message || `queue ${topic}/${queueId}`);
    } catch (e) { setStatus(offline ? "browsing a queue needs a live kernel" : String(e.message || e), true); }
  }

  btnFirst.addEventListener("click", () => { history = []; loadPage(null); });
  btnNext.addEventListener("click", () => {
    if (!page.next) return;
    if (page.mode === "queue") loadQueue(page.topic, page.queue_id, page.next, page.start);
    else loadPage(page.next, "", page.start);
  });
  btnPrev.addEventListener("click", () => {
    if (history.length) {
      const start = history.pop();
      if (page.mode === "queue") loadQueue(page.topic, page.queue_id, start);
      else loadPage(start);
    } else if (page.mode !== "queue") loadPageBefore(page.start);
  });
  btnLast.addEventListener("click", () => { history = []; loadPageBefore(null); });

  // -- selection -------------------------------------------------------------------------------
  async function select(offset) {
    selected = offset;
    for (const tr of recBody.querySelectorAll("tr[data-testid=record-row]")) tr.classList.toggle("selected", tr.getAttribute("data-offset") === offset);
    model.set("selected", offset);
    if (typeof model.save_changes === "function") model.save_changes();
    let d = null;
    try {
      if (offline) d = staticRecord(offset);
      else {
        try {
          const [msg, buffers] = await ask({ kind: "record", offset });
          d = { ...msg.record, data: toBytes(buffers[0]) };
        } catch (e) { d = staticRecord(offset); if (!d) throw e; }
      }
      if (!d) throw new Error("this record's bytes are not embedded in the static HTML");
    } catch (e) {
      setStatus(String(e.message || e), true);
      return;
    }
    const st = { ...d, field_table: model.get("field_table"), selected: "", title: `record at ${fmtInt(offset)}` };
    if (recView) recView.update(st);
    else recView = mountRecord(detail, st);
  }

  // -- lookup ------------------------------------------------------------------------------------
  function staticLookup(q) {
    const rows = embeddedPages().flatMap((p) => p.rows || []);
    const query = q.trim();
    let hits = [];
    let how = "key";
    if (/^([0-9a-fA-F]{32}|[0-9a-fA-F]{56})$/.test(query)) {
      how = "msgId";
      hits = rows.filter((r) => r.msg_id === query.toUpperCase());
    } else if (/^(\d[\d,_]*|0[xX][0-9a-fA-F]+)$/.test(query)) {
      how = "offset";
      const n = BigInt(query.replace(/[,_]/g, ""));
      hits = rows.filter((r) => big(r.offset) <= n && n < big(r.offset) + BigInt(r.size || 1));
    } else {
      const [topic, key] = query.includes("#") ? query.split("#", 2) : [null, query];
      hits = rows.filter((r) => (topic === null || r.topic === topic) && (r.keys || "").split(" ").includes(key));
    }
    const seen = new Set();
    hits = hits.filter((r) => (seen.has(r.offset) ? false : seen.add(r.offset)));
    return { query, how, rows: hits, message: `${how}: ${hits.length} record(s) among the ${rows.length} embedded in this static page` };
  }

  async function doLookup() {
    const q = lookup.value.trim();
    if (!q) return;
    setStatus("searching…");
    let res;
    try {
      if (offline) res = staticLookup(q);
      else {
        try { res = (await ask({ kind: "lookup", query: q }))[0].lookup; } catch (e) { res = staticLookup(q); res.message += ` (${e.message || e})`; }
      }
    } catch (e) { setStatus(String(e.message || e), true); return; }
    history = [];
    page = { mode: "lookup", query: q, start: "", rows: res.rows || [], next: null };
    renderPage();
    setStatus(res.message || `${(res.rows || []).length} record(s)`, !(res.rows || []).length);
    status.setAttribute("data-found", String((res.rows || []).length));
    if ((res.rows || []).length) select(res.rows[0].offset);
  }
  goBtn.addEventListener("click", doLookup);
  lookup.addEventListener("keydown", (ev) => { if (ev.key === "Enter") doLookup(); });

  // -- wiring ----------------------------------------------------------------------------------
  const onSeg = () => segs.update();
  const onSummary = () => renderHead();
  const onQueues = () => renderQueues();
  const onPage = () => { page = model.get("page") || { rows: [] }; history = []; renderPage(); };
  model.on("change:seg_updates", onSeg);
  model.on("change:summary", onSummary);
  model.on("change:queues", onQueues);
  model.on("change:page", onPage);
  renderHead();
  renderQueues();
  renderPage();
  if (selected) select(selected);

  return () => {
    model.off("msg:custom", onCustom);
    model.off("change:seg_updates", onSeg);
    model.off("change:summary", onSummary);
    model.off("change:queues", onQueues);
    model.off("change:page", onPage);
    for (const p of pending.values()) clearTimeout(p.timer);
    segs.dispose();
    root.remove();
  };
}

export default { render };
