// RecordView: a record's bytes as a hex/ASCII grid coloured by field, and its decoded values.
// DOM contract: root data-testid="record-view"; hex byte cells data-testid="byte" data-field="<span name>"
// (class "hl" while their field is highlighted); decoded rows data-testid="field" data-field="<span name>".
import { h, toBytes, big, fmtInt, hex2, clear, throttleFrame } from "./_util.js";

const PER_ROW = 16;
const LINE_H = 18;
const VIRTUAL_ROWS = 512; // above this many grid lines, only the visible ones are in the DOM

function tableMap(table) {
  const m = new Map();
  for (const row of table || []) m.set(row.name, row);
  return m;
}

/** The record state as one object, from a model (RecordView) or given directly (StoreInspector). */
export function recordStateFromModel(model) {
  const keys = ["data", "offset", "total_size", "kind", "version", "msg_id", "summary", "error", "spans", "rows",
    "field_table", "selected", "title"];
  const s = {};
  for (const k of keys) s[k] = model.get(k);
  return s;
}

/**
 * Render a record into el.  opts.onSelect(name) is called when a field is pinned or unpinned.
 * Returns { update(state), highlight(name), dispose }.
 */
export function mountRecord(el, state, opts = {}) {
  const root = h("div", { class: "rmq-view rmq-rec", "data-testid": opts.testid === undefined ? "record-view" : opts.testid });
  el.appendChild(root);
  let st = state;
  let bytes = new Uint8Array(0);
  let fieldOf = []; // byte index -> span index (-1: none)
  let spans = [];
  let meta = new Map();
  let hover = "";
  let pinned = "";
  let cellsByField = new Map(); // name -> [cells] (only cells currently in the DOM)
  let rowsByField = new Map();
  let grid = null;
  let gridInner = null;
  let virtual = false;

  function colorFor(name) {
    const m = meta.get(name);
    return m ? m.color : "hsl(0, 0%, 88%)";
  }

  function current() { return hover || pinned; }

  function applyHighlight() {
    const name = current();
    for (const [f, cells] of cellsByField) {
      const on = name !== "" && f === name; // bytes in no field (a frame's JSON punctuation) never light up
      for (const c of cells) c.classList.toggle("hl", on);
    }
    for (const [f, row] of rowsByField) {
      row.classList.toggle("hl", f === name);
      row.classList.toggle("pinned", f === pinned);
    }
    root.setAttribute("data-highlight", name || "");
  }

  function setHover(name) {
    if (hover === name) return;
    hover = name;
    applyHighlight();
  }

  function setPinned(name, notify = true) {
    pinned = pinned === name ? "" : name;
    applyHighlight();
    if (notify && opts.onSelect) opts.onSelect(pinned);
  }

  function byteCell(i, ascii) {
    const si = fieldOf[i];
    const name = si >= 0 ? spans[si][0] : "";
    const b = bytes[i];
    const cell = document.createElement("span");
    cell.className = ascii ? "rmq-rec-asc" : "rmq-rec-hex";
    if (name.endsWith("_length")) cell.classList.add("rmq-rec-len");
    if (si >= 0 && spans[si][1] === i) cell.classList.add("rmq-rec-first");
    if (!ascii) cell.setAttribute("data-testid", "byte");
    cell.setAttribute("data-field", name);
    cell.setAttribute("data-i", i);
    cell.style.background = name ? colorFor(name) : "";
    cell.textContent = ascii ? (b >= 32 && b < 127 ? String.fromCharCode(b) : "·") : hex2(b);
    if (name && name === current()) cell.classList.add("hl");
    if (!cellsByField.has(name)) cellsByField.set(name, []);
    cellsByField.get(name).push(cell);
    return cell;
  }

  function gridLine(r) {
    const start = r * PER_ROW;
    const end = Math.min(bytes.length, start + PER_ROW);
    const line = h("div", { class: "rmq-rec-line" });
    const base = big(st.offset) + BigInt(start);
    line.appendChild(h("span", { class: "rmq-rec-addr", title: `physical offset ${fmtInt(base)}`, text: start.toString(16).padStart(6, "0") }));
    const hexes = h("span", { class: "rmq-rec-hexes" });
    const ascs = h("span", { class: "rmq-rec-ascs" });
    for (let i = start; i < end; i++) {
      hexes.appendChild(byteCell(i, false));
      ascs.appendChild(byteCell(i, true));
    }
    line.append(hexes, ascs);
    return line;
  }

  function renderGrid() {
    clear(gridInner);
    cellsByField = new Map();
    const lines = Math.ceil(bytes.length / PER_ROW);
    virtual = lines > VIRTUAL_ROWS;
    if (!virtual) {
      gridInner.style.height = "";
      for (let r = 0; r < lines; r++) gridInner.appendChild(gridLine(r));
      return;
    }
    gridInner.style.height = `${lines * LINE_H}px`;
    const top = grid.scrollTop;
    const view = grid.clientHeight || 360;
    const first = Math.max(0, Math.floor(top / LINE_H) - 8);
    const last = Math.min(lines, Math.ceil((top + view) / LINE_H) + 8);
    for (let r = first; r < last; r++) {
      const line = gridLine(r);
      line.style.position = "absolute";
      line.style.top = `${r * LINE_H}px`;
      gridInner.appendChild(line);
    }
  }

  function valueCell(row) {
    const td = h("td", { class: "rmq-rec-value" });
    const v = h("span", { class: row.status === "bad" ? "rmq-bad" : "", text: row.value });
    td.appendChild(v);
    if (row.status === "ok") td.appendChild(h("span", { class: "rmq-ok rmq-rec-status", "data-testid": "crc-status", text: " ✓" }));
    return td;
  }

  // a field's name/value pairs (the properties) get a row of their own under it, across the whole
  // table: squeezed into the value column they would wrap inside short values
  function extraRow(row) {
    const dl = h("table", { class: "rmq-rec-props" });
    for (const [k, val] of row.extra) {
      dl.appendChild(h("tr", { "data-testid": "property", "data-name": k },
        h("td", { class: "rmq-rec-pk", text: k }), h("td", { class: "rmq-rec-pv", text: val })));
    }
    const td = h("td", { class: "rmq-rec-extra" }, dl);
    td.colSpan = 4;
    return h("tr", { class: "rmq-rec-extrarow", "data-field": row.name }, td);
  }

  function render() {
    clear(root);
    bytes = toBytes(st.data);
    spans = st.spans || [];
    meta = new Map(tableMap(st.field_table));
    fieldOf = new Int32Array(bytes.length).fill(-1);
    spans.forEach(([, s, e], i) => { for (let k = Math.max(0, s); k < Math.min(e, bytes.length); k++) fieldOf[k] = i; });
    pinned = st.selected || "";
    hover = "";
    rowsByField = new Map();

    const end = big(st.offset) + BigInt(st.total_size || bytes.length);
    const kindText = st.kind_text ? st.kind_text : st.kind === "message" ? `message record (${st.version})` : st.kind === "blank" ? "blank record (END_OF_FILE)" : st.kind || "no record";
    const head = h("div", { class: "rmq-rec-head" },
      st.title ? h("span", { class: "rmq-rec-title", text: st.title }) : null,
      h("span", { class: "rmq-rec-kind", "data-testid": "record-kind", "data-kind": st.kind || "", text: kindText }),
      h("span", { class: "rmq-muted", "data-testid": "record-offset", "data-offset": String(st.offset ?? "0"),
        text: `offset ${fmtInt(st.offset)} – ${fmtInt(end)} · ${fmtInt(st.total_size || bytes.length)} bytes` +
          (bytes.length < (st.total_size || 0) ? ` (first ${fmtInt(bytes.length)} shown)` : "") }),
      st.msg_id ? h("span", { class: "rmq-mono rmq-rec-msgid", "data-testid": "msg-id", title: "offset msgId: store host + port + physical offset", text: `msgId ${st.msg_id}` }) : null,
      st.summary ? h("span", { class: "rmq-rec-summary", text: st.summary }) : null);
    root.appendChild(head);
    if (st.error) root.appendChild(h("div", { class: "rmq-bad rmq-rec-error", "data-testid": "record-error", text: st.error }));

    grid = h("div", { class: "rmq-rec-grid rmq-mono" });
    gridInner = h("div", { class: "rmq-rec-grid-inner" });
    grid.appendChild(gridInner);
    grid.addEventListener("scroll", throttleFrame(() => { if (virtual) renderGrid(); }));
    grid.addEventListener("mouseover", (ev) => {
      const f = ev.target && ev.target.getAttribute && ev.target.getAttribute("data-field");
      if (f !== null && f !== undefined) setHover(f);
    });
    grid.addEventListener("mouseleave", () => setHover(""));
    grid.addEventListener("click", (ev) => {
      const f = ev.target && ev.target.getAttribute && ev.target.getAttribute("data-field");
      if (f) setPinned(f);
    });

    const table = h("table", { class: "rmq-rec-fields" });
    const tbody = h("tbody");
    table.appendChild(tbody);
    for (const row of st.rows || []) {
      const span = spans.find((s) => s[0] === row.name);
      const m = meta.get(row.name) || {};
      const tr = h("tr", {
        "data-testid": "field", "data-field": row.name, "data-status": row.status || null,
        title: `${row.java || ""}${row.doc ? " — " + row.doc : ""}${row.raw ? "\nraw: " + row.raw : ""}`,
        onmouseenter: () => setHover(row.name), onmouseleave: () => setHover(""), onclick: () => setPinned(row.name),
      },
      h("td", { class: "rmq-rec-swatch" }, h("i", { style: { background: m.color || colorFor(row.name) }, class: row.name.endsWith("_length") ? "rmq-rec-len" : "" })),
      h("td", { class: "rmq-rec-name rmq-mono", text: row.name }),
      h("td", { class: "rmq-rec-range rmq-muted rmq-mono", text: span ? `${span[1]}–${span[2] - 1}` : "" }),
      valueCell(row));
      rowsByField.set(row.name, tr);
      tbody.appendChild(tr);
      if (row.extra && row.extra.length) tbody.appendChild(extraRow(row));
    }
    const body = h("div", { class: "rmq-rec-body" }, h("div", { class: "rmq-rec-gridwrap" }, grid), h("div", { class: "rmq-rec-panel" }, table));
    root.appendChild(body);
    renderGrid();
    applyHighlight();
  }

  render();
  return {
    update(next) { st = next; render(); },
    setSelected(name) { pinned = name || ""; applyHighlight(); },
    highlight(name) { setHover(name || ""); },
    dispose() { root.remove(); },
  };
}

/**
 * Mount a record grid on a model and keep it in step: stateOf(model) gives the state, a change of one of
 * keys re-renders, "selected" is synced both ways. Returns the dispose function render() returns.
 */
export function bindRecord(model, el, stateOf, keys, testid) {
  const view = mountRecord(el, stateOf(model), {
    testid,
    onSelect(name) { model.set("selected", name); model.save_changes(); },
  });
  const onChange = throttleFrame(() => view.update(stateOf(model)));
  const onSelected = () => view.setSelected(model.get("selected"));
  for (const k of keys) model.on(`change:${k}`, onChange);
  model.on("change:selected", onSelected);
  return () => {
    for (const k of keys) model.off(`change:${k}`, onChange);
    model.off("change:selected", onSelected);
    view.dispose();
  };
}

function render({ model, el }) {
  return bindRecord(model, el, recordStateFromModel,
    ["data", "offset", "spans", "rows", "kind", "summary", "error", "title"]);
}

export default { render };
