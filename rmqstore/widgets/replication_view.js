// ReplicationView: a master and its slave side by side (rmqstore.engine.ha).
// State: master, slave (snapshot dicts of rmqstore.engine.ha.replication_snapshot, offsets as decimal
// strings), title, live, updates.
// DOM contract: root data-testid="replication-view"; each side data-testid="ha-side" with
// data-side (master/slave), data-role, data-running; in it one data-testid="pos" per position
// with data-pos (wrote/max_offset/flushed/dispatched) and data-value (exact decimal).
// Per slave connection data-testid="ha-connection" (data-slave, data-requested, data-pushed,
// data-acked); data-testid="push2-slave-max" (data-value); data-testid="replica-waits"
// (data-waiting, data-last-status, data-last-waited-ms, data-last-next-offset); one
// data-testid="replica-outcome" per status (data-status, data-count); the slave's client
// data-testid="ha-client" (data-connected, data-reported, data-master, data-connects).
import { h, big, fmtInt, fmtBytes, clear } from "./_util.js";

export const POSITIONS = [
  ["wrote", "wrote", "appended to the commitlog (the write position)"],
  ["max_offset", "max offset", "readable: what readers see and what a master can push"],
  ["flushed", "flushed", "known to be on disk (flushedWhere)"],
  ["dispatched", "dispatched", "put into consume queues and the index by the reput service"],
];
export const STATUSES = ["PUT_OK", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"];
const WHY = {
  PUT_OK: "a slave acknowledged the put's end offset in time",
  FLUSH_SLAVE_TIMEOUT: "no slave acknowledged it within sync_flush_timeout",
  SLAVE_NOT_AVAILABLE: "answered at once: no slave connected, or the slave too far behind",
};

/** Where v sits between lo and hi, in percent (BigInt-exact until the last division). */
function pct(v, lo, hi) {
  const span = hi - lo;
  if (span <= 0n) return 0;
  const x = big(v) - lo;
  if (x <= 0n) return 0;
  if (x >= span) return 100;
  return Number((x * 100000n) / span) / 1000;
}

function bounds(sides) {
  let lo = null, hi = 0n;
  for (const s of sides) {
    if (!s) continue;
    const mn = big(s.min_offset), w = big(s.wrote);
    if (lo === null || mn < lo) lo = mn;
    if (w > hi) hi = w;
  }
  return [lo === null ? 0n : lo, hi];
}

function posTable(side, name) {
  return h("table", { class: "rmq-ha-pos" }, ...POSITIONS.map(([key, label, doc]) => {
    const v = side[key];
    const shown = v === null || v === undefined ? "–" : fmtInt(v);
    return h("tr", { title: doc },
      h("th", { text: label }),
      h("td", { class: "rmq-mono", "data-testid": "pos", "data-side": name, "data-pos": key,
        "data-value": v === null || v === undefined ? "" : String(v), text: shown }));
  }));
}

function scale(side, lo, hi, marks) {
  const bar = h("div", { class: "rmq-ha-bar", title: `commitlog offsets ${fmtInt(lo)} – ${fmtInt(hi)}` },
    h("div", { class: "rmq-ha-fill rmq-ha-wrote", style: { width: `${pct(side.wrote, lo, hi)}%` } }),
    h("div", { class: "rmq-ha-fill rmq-ha-flushed", style: { width: `${pct(side.flushed, lo, hi)}%` } }));
  for (const [cls, v, label] of marks) {
    if (v === null || v === undefined) continue;
    const p = pct(v, lo, hi);  // the 3 px mark stays inside the bar at both ends
    bar.appendChild(h("div", { class: `rmq-ha-mark ${cls}`, style: { left: `calc(${p}% - ${(3 * p) / 100}px)` },
      title: `${label} ${fmtInt(v)}` }));
  }
  return bar;
}

function sideCard(name, side, lo, hi) {
  if (!side) {
    return h("div", { class: "rmq-ha-side rmq-ha-absent", "data-testid": "ha-side", "data-side": name },
      h("div", { class: "rmq-ha-head" }, h("b", { text: name }), h("span", { class: "rmq-muted", text: " not shown" })));
  }
  const head = h("div", { class: "rmq-ha-head" },
    h("b", { text: name }),
    h("span", { class: "rmq-ha-role", text: side.role }),
    h("span", { class: side.running ? "rmq-ok" : "rmq-bad", text: side.running ? "running" : "stopped" }));
  const where = h("div", { class: "rmq-ha-where rmq-muted rmq-mono", title: side.root, text: side.root });
  const marks = name === "master"
    ? [["rmq-ha-m-acked", side.push2_slave_max_offset, "acknowledged by a slave (push2SlaveMaxOffset)"]]
    : [["rmq-ha-m-reported", side.client && side.client.reported, "last reported to the master"]];
  const parts = [head, where, scale(side, lo, hi, marks), posTable(side, name)];
  if (name === "master" && side.listen !== undefined) {
    parts.push(h("div", { class: "rmq-ha-line" }, "HA port ", h("span", { class: "rmq-mono", text: side.listen || "–" }),
      " · acknowledged ",
      h("span", { class: "rmq-mono", "data-testid": "push2-slave-max", "data-value": String(side.push2_slave_max_offset),
        title: "push2SlaveMaxOffset: the highest offset any slave reported", text: fmtInt(side.push2_slave_max_offset) })));
  }
  if (side.client) parts.push(clientLine(side.client));
  if (name === "master" && side.outcomes) parts.push(waits(side));
  return h("div", { class: "rmq-ha-side", "data-testid": "ha-side", "data-side": name, "data-role": side.role,
    "data-running": side.running ? "true" : "false" }, ...parts);
}

function clientLine(c) {
  return h("div", { class: "rmq-ha-line", "data-testid": "ha-client", "data-connected": c.connected ? "true" : "false",
    "data-reported": String(c.reported), "data-master": c.master || "", "data-connects": String(c.connects) },
    h("span", { class: c.connected ? "rmq-ok" : "rmq-bad", text: c.connected ? "connected" : "not connected" }),
    ` to ${c.master || "(no master address)"} · reported `, h("span", { class: "rmq-mono", text: fmtInt(c.reported) }),
    ` · ${c.connects} connect${c.connects === 1 ? "" : "s"}`,
    c.last_close_reason ? h("div", { class: "rmq-muted", text: `last closed: ${c.last_close_reason}` }) : null);
}

function waits(side) {
  const last = side.last_replica;
  const outcomes = side.outcomes || {};
  const names = [...STATUSES, ...Object.keys(outcomes).filter((k) => !STATUSES.includes(k))];
  const root = h("div", { class: "rmq-ha-waits", "data-testid": "replica-waits", "data-waiting": String(side.waiting),
    "data-last-status": last ? last.status : "", "data-last-waited-ms": last ? String(last.waited_ms) : "",
    "data-last-next-offset": last && last.next_offset !== null ? String(last.next_offset) : "" },
    h("div", { class: "rmq-ha-sub", text: side.role === "SYNC_MASTER" ? "SYNC_MASTER waits" : "replica waits" }),
    h("div", {}, h("b", { text: String(side.waiting) }), ` put${side.waiting === 1 ? "" : "s"} waiting for a slave now`,
      h("span", { class: "rmq-muted", text: ` (timeout ${fmtInt(side.sync_flush_timeout)} ms)` })),
    last ? h("div", {}, "last: ", h("span", { class: last.status === "PUT_OK" ? "rmq-ok" : "rmq-bad", text: last.status,
      title: WHY[last.status] || "" }),
      last.next_offset !== null ? ` for end offset ${fmtInt(last.next_offset)}` : " (did not wait)",
      ` after ${Number(last.waited_ms).toFixed(2)} ms`) : h("div", { class: "rmq-muted", text: "no SYNC_MASTER put yet" }),
    h("div", { class: "rmq-ha-outcomes" }, ...names.map((s) => h("span", {
      class: "rmq-ha-outcome" + ((outcomes[s] || 0) > 0 ? "" : " rmq-muted"), "data-testid": "replica-outcome",
      "data-status": s, "data-count": String(outcomes[s] || 0), title: WHY[s] || "" },
      h("span", { class: "rmq-mono", text: s }), ` ${fmtInt(outcomes[s] || 0)}`))));
  return root;
}

function connections(master) {
  const conns = master.slaves || [];
  const max = big(master.max_offset);
  const rows = conns.map((c) => {
    const acked = big(c.acked);
    return h("tr", { "data-testid": "ha-connection", "data-slave": c.slave, "data-requested": String(c.requested),
      "data-pushed": String(c.pushed), "data-acked": String(c.acked) },
      h("td", { class: "rmq-mono", text: c.slave }),
      h("td", { class: "rmq-mono", text: fmtInt(c.requested) }),
      h("td", { class: "rmq-mono", text: fmtInt(c.pushed) }),
      h("td", { class: "rmq-mono", text: fmtInt(c.acked) }),
      h("td", { class: "rmq-mono", text: acked >= 0n ? fmtBytes(max - acked) : "–" }));
  });
  return h("div", { class: "rmq-ha-conns" },
    h("div", { class: "rmq-ha-sub", text: `the master's slaves (${conns.length} connected)` }),
    conns.length ? h("table", { class: "rmq-ha-table" },
      h("tr", {}, ...["slave", "requested", "pushed", "acknowledged", "behind"].map((x) => h("th", { text: x }))),
      ...rows) : h("div", { class: "rmq-muted", text: "no slave connected" }));
}

export function mountReplication(el, model) {
  const root = h("div", { class: "rmq-view rmq-ha", "data-testid": "replication-view" });
  el.appendChild(root);
  function update() {
    clear(root);
    const master = model.get("master"), slave = model.get("slave");
    const [lo, hi] = bounds([master, slave]);
    root.appendChild(h("div", { class: "rmq-ha-title" },
      h("span", { text: model.get("title") || "replication" }),
      model.get("live") ? h("span", { class: "rmq-live", text: "live" }) : null,
      h("span", { class: "rmq-muted", text: ` · offsets ${fmtInt(lo)} – ${fmtInt(hi)}` })));
    root.appendChild(h("div", { class: "rmq-ha-pair" }, sideCard("master", master, lo, hi),
      h("div", { class: "rmq-ha-arrow", text: "→" }), sideCard("slave", slave, lo, hi)));
    if (master && master.slaves) root.appendChild(connections(master));
    root.appendChild(h("div", { class: "rmq-ha-legend rmq-muted" },
      h("span", {}, h("i", { class: "rmq-ha-key rmq-ha-flushed" }), "flushed"),
      h("span", {}, h("i", { class: "rmq-ha-key rmq-ha-wrote" }), "wrote"),
      h("span", {}, h("i", { class: "rmq-ha-key rmq-ha-m-acked" }), "acknowledged by a slave"),
      h("span", {}, h("i", { class: "rmq-ha-key rmq-ha-m-reported" }), "reported by the slave")));
  }
  update();
  return { update, dispose() { root.remove(); } };
}

function render({ model, el }) {
  const view = mountReplication(el, model);
  const onChange = () => view.update();
  for (const k of ["updates", "live", "title"]) model.on(`change:${k}`, onChange);
  return () => {
    for (const k of ["updates", "live", "title"]) model.off(`change:${k}`, onChange);
    view.dispose();
  };
}

export default { render };
