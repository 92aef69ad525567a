// BrokerView: a RocketMQ cluster live -- brokers, queues, consumer lag (rmqstore.admin's snapshot).
// State: brokers, queues, progress (rows; offsets, lag and timestamps as decimal strings), history
// ([{t, tps: {address: [put, get]}, down: {address: error}, lag: {group: "n"}}]), errors, taken_at, title, namesrv, live, updates,
// opened (the answer to the last click).
// DOM contract: root data-testid="broker-view" (data-updates, data-taken-at); one data-testid="broker-row" per
// broker (data-broker-name, data-broker-id, data-address, data-role, data-version, data-min-offset,
// data-max-offset, data-local); sparklines data-testid="sparkline" (data-series "put:<address>",
// "get:<address>", "lag:<group>"; data-points, data-last) and beside each rate data-testid="rate" (data-series); one data-testid="queue-row" per queue (data-topic,
// data-broker-name, data-queue, data-min, data-max); one data-testid="group" per consumer group (data-group,
// data-lag: its total); one data-testid="lag-row" per group and queue (data-group, data-topic,
// data-broker-name, data-queue, data-broker-offset, data-consumer-offset, data-lag); clickable places
// data-testid="open" (data-broker-name, data-topic, data-queue, data-queue-offset or data-commit-log-offset);
// data-testid="open-result" says what a click did (data-ok).
import { h, big, fmtInt, clear, isStatic } from "./_util.js";

const SPARK_W = 120, SPARK_H = 24;

/** A sparkline of numbers (BigInt-safe: values are scaled against their maximum as BigInt). */
function sparkline(series, values, title) {
  const nums = values.map((v) => (typeof v === "number" ? v : Number(big(v))));
  const max = Math.max(1e-9, ...nums);
  const n = nums.length;
  const pts = nums.map((v, i) => {
    const x = n <= 1 ? SPARK_W : (i * SPARK_W) / (n - 1);
    const y = SPARK_H - 1 - (Math.max(0, v) / max) * (SPARK_H - 2);
    return `${x.toFixed(1)},${y.toFixed(1)}`;
  });
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", String(SPARK_W));
  svg.setAttribute("height", String(SPARK_H));
  svg.setAttribute("class", "rmq-bv-spark");
  svg.setAttribute("data-testid", "sparkline");
  svg.setAttribute("data-series", series);
  svg.setAttribute("data-points", String(n));
  svg.setAttribute("data-last", n ? String(values[n - 1]) : "");
  const t = document.createElementNS("http://www.w3.org/2000/svg", "title");
  t.textContent = `${title}: ${n} sample${n === 1 ? "" : "s"}, max ${max > 1e-9 ? fmtNum(max) : 0}`;
  svg.appendChild(t);
  if (n) {
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", n === 1 ? `0,${pts[0].split(",")[1]} ${pts[0]}` : pts.join(" "));
    svg.appendChild(line);
  }
  return svg;
}

function fmtNum(v) {
  const x = Number(v);
  return Number.isInteger(x) ? fmtInt(x) : x.toFixed(1);
}

function fmtTime(ms) {
  const n = Number(big(ms));
  if (!n) return "–";
  return new Date(n).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

/** A clickable place (opens the store there through the kernel) or plain text when the store is not here. */
function place(local, where, text, title) {
  if (!local) return h("span", { class: "rmq-mono", text, title });
  const attrs = { class: "rmq-bv-open rmq-mono", "data-testid": "open", text, tabindex: "0",
    title: `${title} — click: open the store here in a StoreInspector` };
  for (const [k, v] of Object.entries(where)) if (v !== undefined && v !== null) attrs[`data-${k}`] = String(v);
  return h("span", attrs);
}

/** A rate: its sparkline over the history and its last value (the broker's own 10 s figure in the tooltip). */
function rateCell(kind, b, values, own) {
  const last = values.length ? values[values.length - 1] : own;
  return h("td", { title: `${kind} messages a second between snapshots; the broker's own 10 s ${kind}Tps: ${fmtNum(own)}` },
    h("span", { class: "rmq-bv-tps" }, sparkline(`${kind}:${b.address}`, values, `${kind} TPS`),
      h("span", { class: "rmq-mono", "data-testid": "rate", "data-series": `${kind}:${b.address}`, text: fmtNum(last) })));
}

function brokersTable(brokers, history) {
  const series = (address, i) => history.map((s) => ((s.tps || {})[address] || [0, 0])[i]);
  return h("table", { class: "rmq-bv-table" },
    h("tr", {}, ...["broker", "role", "address", "version", "put/s", "get/s", "commitlog offsets", "disk", "store"]
      .map((x) => h("th", { text: x }))),
    ...brokers.map((b) => {
      const up = !b.error;
      return h("tr", { "data-testid": "broker-row", "data-broker-name": b.broker_name, "data-broker-id": String(b.broker_id),
        "data-address": b.address, "data-role": b.role, "data-version": b.version || "",
        "data-min-offset": b.commit_log_min_offset ?? "", "data-max-offset": b.commit_log_max_offset ?? "",
        "data-local": b.local ? "true" : "false", class: up ? "" : "rmq-bv-down" },
        h("td", {}, h("b", { text: b.broker_name }), h("span", { class: "rmq-muted", text: ` ${b.cluster}` })),
        h("td", { text: `${b.role} (${b.broker_id})` }),
        h("td", { class: "rmq-mono", text: b.address }),
        h("td", { text: up ? b.version : "" }),
        up ? rateCell("put", b, series(b.address, 0), b.put_tps) : h("td", { class: "rmq-bad", text: `down: ${b.error}`, colSpan: 5 }),
        up ? rateCell("get", b, series(b.address, 1), b.get_tps) : null,
        up ? h("td", {}, h("span", { class: "rmq-mono", text: `${fmtInt(b.commit_log_min_offset)} – ` }),
          place(b.local && b.broker_id === 0, { "broker-name": b.broker_name, "commit-log-offset": b.commit_log_max_offset },
            fmtInt(b.commit_log_max_offset), "commitlog max offset")) : null,
        up ? h("td", { class: "rmq-mono", text: `${(Number(b.disk_ratio) * 100).toFixed(1)} %`,
          title: "commitLogDiskRatio: the disk's used share" }) : null,
        up ? h("td", { class: "rmq-mono rmq-bv-root", title: b.store_root || "",
          text: b.local ? b.store_root : b.store_root ? `${b.store_root} (elsewhere)` : "–" }) : null);
    }));
}

function localOf(brokers) {
  const local = new Set();
  for (const b of brokers) if (b.local && b.broker_id === 0) local.add(b.broker_name);
  return local;
}

function queuesTable(queues, local) {
  if (!queues.length) return h("div", { class: "rmq-muted", text: "no topic" });
  return h("table", { class: "rmq-bv-table" },
    h("tr", {}, ...["topic", "broker", "queue", "min offset", "max offset", "messages", "last stored"].map((x) => h("th", { text: x }))),
    ...queues.map((q) => h("tr", { "data-testid": "queue-row", "data-topic": q.topic, "data-broker-name": q.broker_name,
      "data-queue": String(q.queue_id), "data-min": q.min_offset, "data-max": q.max_offset },
      h("td", { text: q.topic }), h("td", { text: q.broker_name }),
      h("td", {}, place(local.has(q.broker_name), { "broker-name": q.broker_name, topic: q.topic, queue: q.queue_id,
        "queue-offset": q.min_offset }, String(q.queue_id), `queue ${q.topic}/${q.queue_id}`)),
      h("td", { class: "rmq-mono", text: fmtInt(q.min_offset) }),
      h("td", { class: "rmq-mono", text: fmtInt(q.max_offset) }),
      h("td", { class: "rmq-mono", text: fmtInt(big(q.max_offset) - big(q.min_offset)) }),
      h("td", { class: "rmq-muted", text: fmtTime(q.last_update_timestamp) }))));
}

function groupsSection(progress, history, local) {
  if (!progress.length) return h("div", { class: "rmq-muted", text: "no consumer group with offsets" });
  const groups = new Map();
  for (const q of progress) {
    if (!groups.has(q.group)) groups.set(q.group, []);
    groups.get(q.group).push(q);
  }
  let maxLag = 1n;
  for (const q of progress) if (big(q.lag) > maxLag) maxLag = big(q.lag);
  const out = [];
  for (const [group, rows] of groups) {
    const total = rows.reduce((s, q) => s + big(q.lag), 0n);
    const lagSeries = history.map((s) => (s.lag || {})[group] ?? "0");
    out.push(h("div", { class: "rmq-bv-group", "data-testid": "group", "data-group": group, "data-lag": total.toString() },
      h("div", { class: "rmq-bv-ghead" }, h("b", { text: group }),
        h("span", { class: total > 0n ? "rmq-bv-lagging" : "rmq-ok", text: ` lag ${fmtInt(total)}` }),
        sparkline(`lag:${group}`, lagSeries, `${group} total lag`)),
      h("table", { class: "rmq-bv-table" },
        h("tr", {}, ...["topic", "broker", "queue", "broker offset", "consumer offset", "lag", ""].map((x) => h("th", { text: x }))),
        ...rows.map((q) => {
          const lag = big(q.lag);
          const w = Number((lag * 1000n) / maxLag) / 10;
          return h("tr", { "data-testid": "lag-row", "data-group": group, "data-topic": q.topic, "data-broker-name": q.broker_name,
            "data-queue": String(q.queue_id), "data-broker-offset": q.broker_offset, "data-consumer-offset": q.consumer_offset,
            "data-lag": q.lag },
            h("td", { text: q.topic }), h("td", { text: q.broker_name }), h("td", { class: "rmq-mono", text: String(q.queue_id) }),
            h("td", { class: "rmq-mono", text: fmtInt(q.broker_offset) }),
            h("td", {}, place(local.has(q.broker_name), { "broker-name": q.broker_name, topic: q.topic, queue: q.queue_id,
              "queue-offset": q.consumer_offset }, fmtInt(q.consumer_offset), "the group's next message")),
            h("td", { class: "rmq-mono" + (lag > 0n ? " rmq-bv-lagging" : ""), text: fmtInt(q.lag) }),
            h("td", { class: "rmq-bv-lagcell" }, h("div", { class: "rmq-bv-lagbar", style: { width: `${w}%` } })));
        }))));
  }
  return h("div", {}, ...out);
}

function render({ model, el }) {
  const root = h("div", { class: "rmq-view rmq-bv", "data-testid": "broker-view" });
  el.appendChild(root);
  const offline = isStatic(model);
  const result = h("div", { class: "rmq-bv-result rmq-muted", "data-testid": "open-result" });
  let seq = 0;

  function showResult(ok, text) {
    result.textContent = text;
    result.setAttribute("data-ok", ok ? "true" : "false");
    result.className = `rmq-bv-result ${ok ? "rmq-muted" : "rmq-bad"}`;
  }

  function onClick(ev) {
    const t = ev.target.closest ? ev.target.closest("[data-testid=open]") : null;
    if (!t || !root.contains(t)) return;
    const where = { broker_name: t.getAttribute("data-broker-name"), topic: t.getAttribute("data-topic"),
      queue_id: t.getAttribute("data-queue"), queue_offset: t.getAttribute("data-queue-offset"),
      commit_log_offset: t.getAttribute("data-commit-log-offset") };
    const what = where.topic ? `${where.topic}/${where.queue_id} from queue offset ${fmtInt(where.queue_offset)}`
      : `commitlog before ${fmtInt(where.commit_log_offset)}`;
    if (offline || typeof model.send !== "function") {
      showResult(false, `static page: a running kernel opens ${where.broker_name}'s store at ${what}`);
      return;
    }
    showResult(true, `opening ${where.broker_name}'s store at ${what}…`);
    model.send({ kind: "open", id: `o${++seq}`, ...where });
  }
  root.addEventListener("click", onClick);
  root.addEventListener("keydown", (ev) => { if (ev.key === "Enter") onClick(ev); });

  const onCustom = (msg) => {
    if (msg && msg.kind === "opened") showResult(Boolean(msg.ok), msg.message || "");
  };
  model.on("msg:custom", onCustom);

  const body = h("div");
  root.append(body, result);

  function update() {
    clear(body);
    const brokers = model.get("brokers") || [], queues = model.get("queues") || [];
    const progress = model.get("progress") || [], history = model.get("history") || [];
    const errors = model.get("errors") || [];
    const local = localOf(brokers);
    root.setAttribute("data-updates", String(model.get("updates")));
    root.setAttribute("data-taken-at", String(model.get("taken_at")));
    body.append(
      h("div", { class: "rmq-bv-title" },
        h("span", { text: model.get("title") || "cluster" }),
        model.get("live") ? h("span", { class: "rmq-live", text: "live" }) : null,
        h("span", { class: "rmq-muted", text: ` · ${brokers.length} broker${brokers.length === 1 ? "" : "s"} · `
          + `snapshot ${fmtTime(model.get("taken_at"))} · ${history.length} sample${history.length === 1 ? "" : "s"}` })),
      h("div", { class: "rmq-bv-sub", text: "Brokers" }), brokersTable(brokers, history),
      h("div", { class: "rmq-bv-sub", text: "Topics and queues" }), queuesTable(queues, local),
      h("div", { class: "rmq-bv-sub", text: "Consumer groups" }), groupsSection(progress, history, local),
      h("div", { class: "rmq-bv-errors", "data-testid": "errors" }, ...errors.map((e) => h("div", { class: "rmq-bad", text: e }))));
  }
  update();
  const keys = ["updates", "live", "title", "errors"];
  for (const k of keys) model.on(`change:${k}`, update);
  const opened = model.get("opened");
  if (opened && opened.message) showResult(Boolean(opened.ok), opened.message);
  return () => {
    for (const k of keys) model.off(`change:${k}`, update);
    model.off("msg:custom", onCustom);
    root.remove();
  };
}

export default { render };
