// SegmentView: one bar per commitlog segment (and consume-queue file).
// State: rows, files (int64 LE per row), positions (7 x int32 LE per row), groups, summary.
// DOM contract: root data-testid="segment-view"; each bar row data-testid="segment" with
// data-file, data-wrote, data-committed, data-flushed (decimal, relative to the file start).
import { h, toView, fmtInt, fileName, fmtBytes, throttleFrame, clear } from "./_util.js";

export const ROW_H = 22;
export const VIRTUALISE_ABOVE = 300;
const OVERSCAN = 12;

/** Decode the binary columns into row objects. */
export function decodeSegments(model) {
  const n = model.get("rows") || 0;
  const files = toView(model.get("files"));
  const pos = toView(model.get("positions"));
  const rows = [];
  const count = Math.min(n, Math.floor(files.byteLength / 8), Math.floor(pos.byteLength / 28));
  for (let i = 0; i < count; i++) {
    const o = i * 28;
    rows.push({
      index: i,
      from: files.getBigInt64(i * 8, true),
      wrote: pos.getInt32(o, true),
      committed: pos.getInt32(o + 4, true),
      flushed: pos.getInt32(o + 8, true),
      size: pos.getInt32(o + 12, true),
      blank: pos.getInt32(o + 16, true),
      group: pos.getInt32(o + 20, true),
      flags: pos.getInt32(o + 24, true),
    });
  }
  return rows;
}

function pct(v, size) {
  return size > 0 ? `${Math.max(0, Math.min(100, (100 * v) / size))}%` : "0%";
}

/** One bar row; also used by the StoreInspector. */
export function segmentRow(r, groups, onclick) {
  const name = fileName(r.from);
  const wb = (r.flags & 1) !== 0;
  const bar = h("div", { class: "rmq-seg-bar" },
    h("div", { class: "rmq-seg-fill rmq-seg-wrote", style: { width: pct(r.wrote, r.size) } }),
    wb || r.committed > 0 ? h("div", { class: "rmq-seg-fill rmq-seg-committed", style: { width: pct(r.committed, r.size) } }) : null,
    h("div", { class: "rmq-seg-fill rmq-seg-flushed", style: { width: pct(r.flushed, r.size) } }),
    r.blank >= 0 ? h("div", { class: "rmq-seg-blank", style: { left: pct(r.blank, r.size), width: pct(r.size - r.blank, r.size) } }) : null,
  );
  const g = groups && groups[r.group];
  const blankText = r.blank >= 0 ? ` · blank ${fmtBytes(r.size - r.blank)}` : r.blank === -2 ? " · blank ?" : "";
  const vals = h("span", { class: "rmq-seg-vals" },
    h("span", { class: "rmq-seg-v-w", text: `w ${fmtInt(r.wrote)}` }),
    h("span", { class: "rmq-seg-v-c" + (wb ? "" : " rmq-seg-dim"), text: `c ${fmtInt(r.committed)}` }),
    h("span", { class: "rmq-seg-v-f", text: `f ${fmtInt(r.flushed)}` }),
    blankText ? h("span", { class: "rmq-seg-v-b", text: blankText.slice(3) }) : null);
  const title = `${g ? g.label + "/" : ""}${name}\nstarts at offset ${fmtInt(r.from)}, ${fmtInt(r.size)} bytes\n` +
    `wrote ${fmtInt(r.wrote)}  committed ${fmtInt(r.committed)}${wb ? "" : " (no write buffer: stays 0)"}  flushed ${fmtInt(r.flushed)}` +
    (r.blank >= 0 ? `\nblank END_OF_FILE record at ${fmtInt(r.blank)} (${fmtInt(r.size - r.blank)} bytes)` : "");
  return h("div", {
    class: "rmq-seg-row" + (wb ? " rmq-seg-wb" : "") + ((r.flags & 2) ? " rmq-seg-full" : ""),
    "data-testid": "segment", "data-file": name, "data-wrote": r.wrote, "data-committed": r.committed,
    "data-flushed": r.flushed, "data-size": r.size, "data-blank": r.blank, "data-group": g ? g.label : "",
    "data-index": r.index, title, onclick,
  }, h("span", { class: "rmq-seg-name", text: name }), bar, vals);
}

/** Draw the overview strip: one column per commitlog row, height = fill. */
export function drawOverview(canvas, rows) {
  const w = Math.max(1, canvas.clientWidth || 600);
  const hgt = canvas.clientHeight || 28;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(hgt * dpr);
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  ctx.scale(dpr, dpr);
  ctx.clearRect(0, 0, w, hgt);
  const n = rows.length;
  if (!n) return;
  const cw = w / n;
  const styles = getComputedStyle(canvas);
  const cWrote = styles.getPropertyValue("--rmq-seg-wrote").trim() || "#9ecae1";
  const cFlushed = styles.getPropertyValue("--rmq-seg-flushed").trim() || "#08519c";
  const cBlank = styles.getPropertyValue("--rmq-seg-blankc").trim() || "#bbb";
  for (let i = 0; i < n; i++) {
    const r = rows[i];
    const x = i * cw;
    const ww = Math.max(cw - (cw > 3 ? 1 : 0), 0.5);
    const fw = r.size > 0 ? r.wrote / r.size : 0;
    const ff = r.size > 0 ? r.flushed / r.size : 0;
    const fb = r.blank >= 0 && r.size > 0 ? (r.size - r.blank) / r.size : 0;
    ctx.fillStyle = cWrote;
    ctx.fillRect(x, hgt * (1 - fw), ww, hgt * fw);
    ctx.fillStyle = cFlushed;
    ctx.fillRect(x, hgt * (1 - ff), ww, hgt * ff);
    if (fb > 0) {
      ctx.fillStyle = cBlank;
      ctx.fillRect(x, 0, ww, hgt * fb);
    }
  }
}

/** Render the whole view into el; returns { update, dispose }. Used by SegmentView and StoreInspector. */
export function mountSegments(el, model, opts = {}) {
  const root = h("div", { class: "rmq-view rmq-seg", "data-testid": opts.testid === undefined ? "segment-view" : opts.testid });
  const head = h("div", { class: "rmq-seg-head" });
  const legend = h("div", { class: "rmq-seg-legend" },
    h("span", {}, h("i", { class: "rmq-seg-key rmq-seg-flushed" }), "flushed"),
    h("span", {}, h("i", { class: "rmq-seg-key rmq-seg-committed" }), "committed"),
    h("span", {}, h("i", { class: "rmq-seg-key rmq-seg-wrote" }), "wrote"),
    h("span", {}, h("i", { class: "rmq-seg-key rmq-seg-blank" }), "blank tail"),
    h("span", {}, h("i", { class: "rmq-seg-key rmq-seg-free" }), "unwritten"));
  const overview = h("canvas", { class: "rmq-seg-overview", title: "all segments: click to scroll there" });
  const list = h("div", { class: "rmq-seg-list", tabindex: "0" });
  const inner = h("div", { class: "rmq-seg-inner" });
  list.appendChild(inner);
  root.append(head, legend, overview, list);
  el.appendChild(root);

  let rows = [];
  let items = [];
  let groups = [];

  function buildItems() {
    groups = model.get("groups") || [];
    rows = decodeSegments(model);
    items = [];
    let last = -1;
    for (const r of rows) {
      if (groups.length > 1 && r.group !== last) { items.push({ group: r.group }); last = r.group; }
      items.push({ row: r });
    }
  }

  function renderHead() {
    clear(head);
    const s = model.get("summary") || {};
    const title = model.get("title") || "";
    const segs = rows.filter((r) => r.group === 0).length;
    head.append(...[
      h("span", { class: "rmq-seg-title", text: title || "segments" }),
      model.get("live") ? h("span", { class: "rmq-seg-live", text: "live" }) : null,
      h("span", { class: "rmq-seg-sum", "data-testid": "segment-summary",
        text: `${fmtInt(rows.length)} file${rows.length === 1 ? "" : "s"}` +
          (s.file_size ? ` · ${fmtBytes(s.file_size)} each` : "") +
          (s.min_offset !== undefined ? ` · offsets ${fmtInt(s.min_offset)} – ${fmtInt(s.max_offset)}` : "") +
          (s.flushed_where !== undefined ? ` · flushed to ${fmtInt(s.flushed_where)}` : "") +
          (segs !== rows.length ? ` · ${segs} commitlog segments` : "") })].filter(Boolean));
  }

  function itemEl(it) {
    if (it.group !== undefined) {
      return h("div", { class: "rmq-seg-group", text: (groups[it.group] || {}).label || "" });
    }
    return segmentRow(it.row, groups, opts.onRowClick ? () => opts.onRowClick(it.row) : null);
  }

  function renderRows() {
    const virtual = items.length > VIRTUALISE_ABOVE;
    root.classList.toggle("rmq-seg-virtual", virtual);
    clear(inner);
    if (!virtual) {
      inner.style.height = "";
      for (const it of items) inner.appendChild(itemEl(it));
      return;
    }
    const total = items.length * ROW_H;
    inner.style.height = `${total}px`;
    const top = list.scrollTop;
    const view = list.clientHeight || 400;
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(items.length, Math.ceil((top + view) / ROW_H) + OVERSCAN);
    for (let i = first; i < last; i++) {
      const e = itemEl(items[i]);
      e.style.position = "absolute";
      e.style.top = `${i * ROW_H}px`;
      e.style.left = "0";
      e.style.right = "0";
      inner.appendChild(e);
    }
  }

  // scroll events come at most once a frame: render the new window at once (no extra frame of lag)
  let lastFirst = -1;
  const onScroll = () => {
    if (items.length <= VIRTUALISE_ABOVE) return;
    const first = Math.floor(list.scrollTop / ROW_H);
    if (first === lastFirst) return;
    lastFirst = first;
    renderRows();
  };
  list.addEventListener("scroll", onScroll);

  overview.addEventListener("click", (ev) => {
    const rect = overview.getBoundingClientRect();
    const segRows = rows.filter((r) => r.group === 0);
    if (!segRows.length) return;
    const i = Math.floor(((ev.clientX - rect.left) / rect.width) * segRows.length);
    const target = segRows[Math.max(0, Math.min(segRows.length - 1, i))];
    const idx = items.findIndex((it) => it.row === target);
    scrollToItem(idx);
  });

  function scrollToItem(idx) {
    if (idx < 0) return;
    if (items.length > VIRTUALISE_ABOVE) {
      list.scrollTop = Math.max(0, idx * ROW_H - list.clientHeight / 2);
      renderRows();
    } else {
      const e = inner.children[idx];
      if (e) list.scrollTop = Math.max(0, e.offsetTop - list.clientHeight / 2);
    }
  }

  function redrawOverview() {
    const segRows = rows.filter((r) => r.group === 0);
    overview.style.display = segRows.length > 1 ? "" : "none";
    if (segRows.length > 1) drawOverview(overview, segRows);
  }

  function update() {
    buildItems();
    renderHead();
    renderRows();
    redrawOverview();
  }

  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(throttleFrame(() => { redrawOverview(); if (items.length > VIRTUALISE_ABOVE) renderRows(); })) : null;
  if (ro) ro.observe(root);
  update();
  requestAnimationFrame(redrawOverview);

  return {
    update,
    scrollToFile(name) { scrollToItem(items.findIndex((it) => it.row && fileName(it.row.from) === name)); },
    dispose() { if (ro) ro.disconnect(); list.removeEventListener("scroll", onScroll); root.remove(); },
  };
}

function render({ model, el }) {
  const view = mountSegments(el, model);
  const onChange = () => view.update();
  model.on("change:updates", onChange);
  model.on("change:live", onChange);
  model.on("change:title", onChange);
  return () => {
    model.off("change:updates", onChange);
    model.off("change:live", onChange);
    model.off("change:title", onChange);
    view.dispose();
  };
}

export default { render };
