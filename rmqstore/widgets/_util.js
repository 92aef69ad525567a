// Shared helpers of the rmqstore views (inlined into each view's ESM by widgets/_assets.py).
//
// 64-bit values (physical offsets, timestamps) arrive as decimal strings and are handled as
// BigInt; positions inside one file (< 2^31) are plain numbers.

/** Create an element: h("div", {class: "x", "data-testid": "y", onclick: fn, style: {...}}, ...children). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
      else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k in el && !k.startsWith("data-") && k !== "list" && k !== "type") el[k] = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return el;
}

/** Bytes of a synced Bytes trait or a custom-message buffer (DataView, ArrayBuffer, typed array, base64). */
export function toBytes(v) {
  if (v === undefined || v === null) return new Uint8Array(0);
  if (v instanceof Uint8Array) return v;
  if (v instanceof DataView) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (typeof v === "string") {
    const bin = atob(v);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  if (v && v.buffer instanceof ArrayBuffer) return new Uint8Array(v.buffer);
  return new Uint8Array(0);
}

/** A DataView over the same bytes (for little-endian int32/int64 columns). */
export function toView(v) {
  const b = toBytes(v);
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

/** BigInt of a decimal string, number or BigInt (0n for anything else). */
export function big(v) {
  try {
    if (typeof v === "bigint") return v;
    if (typeof v === "number") return BigInt(Math.trunc(v));
    if (typeof v === "string" && v.trim() !== "") return BigInt(v.trim());
  } catch (e) { /* not a number */ }
  return 0n;
}

/** Thousands separators for a number, BigInt or decimal string: 1234567 -> "1,234,567". */
export function fmtInt(v) {
  let s = typeof v === "bigint" ? v.toString() : typeof v === "number" ? String(Math.trunc(v)) : String(v ?? "");
  let sign = "";
  if (s.startsWith("-")) { sign = "-"; s = s.slice(1); }
  if (!/^\d+$/.test(s)) return sign + s;
  return sign + s.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** A commitlog/consume-queue file name: the 20-digit zero-padded start offset. */
export function fileName(offset) {
  return big(offset).toString().padStart(20, "0");
}

/** Bytes as "1.5 KiB". */
export function fmtBytes(n) {
  n = Number(n);
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let i = -1;
  do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
  return `${n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
}

export function hex2(b) {
  return (b < 16 ? "0" : "") + b.toString(16).toUpperCase();
}

/** The colour of a field by name, from the field table sent by Python (layout.MESSAGE_FIELDS). */
export function colorOf(table, name) {
  for (const row of table || []) if (row.name === name) return row.color;
  return "hsl(0, 0%, 85%)";
}

/** Call fn at most once per animation frame. */
export function throttleFrame(fn) {
  let pending = false;
  return (...args) => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; fn(...args); });
  };
}

/** Is this model a static page's shim (no kernel to answer custom messages)? */
export function isStatic(model) {
  return Boolean(model && model.rmq_static);
}

/** Remove every child of an element. */
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}
