// PutPathPlayer: step through a recorded put path; plays in the browser from the synced state.
// DOM contract: root data-testid="put-path-player"; buttons data-testid="play", "pause",
// "step-forward", "step-back"; range input data-testid="scrub"; select data-testid="speed"
// (steps per second); text data-testid="step-index" (0-based current step), "stage" (stage name),
// "pos-wrote", "pos-committed", "pos-flushed" (plain decimal positions, relative to the file,
// after the current step). With request frames in the trace (a send through the broker): "frame-bar"
// (the current frame, one data-testid="frame-span" per field, class "active" on the current step's) and
// "frame-field" (data-field = the field's name, its bytes in hex and as text).
import { h, fmtInt, clear, colorOf, toBytes, hex2 } from "./_util.js";

const DEFAULT_LANES = [{ lane: 0, label: "put thread" }, { lane: 1, label: "after the lock" }];

export const SPEEDS = [0.5, 1, 2, 4, 8, 16, 32];

function clamp(v, lo, hi) { return Math.max(lo, Math.min(hi, v)); }

/** Every file's [wrote, committed, flushed] after step i (replaying step.set; O(i), cheap). */
function tableAt(steps, files, i) {
  const rows = files.map(() => [0, 0, 0]);
  const seen = files.map(() => false);
  for (let k = 0; k <= i && k < steps.length; k++) {
    const s = steps[k];
    if (s.set) {
      const [f, w, c, fl] = s.set;
      rows[f] = [w, c, fl];
      seen[f] = true;
    }
  }
  return { rows, seen };
}

/** Per file, the append steps: [{step, start, end}] (record bounds relative to the file). */
function appendsByFile(steps, files) {
  const out = files.map(() => []);
  steps.forEach((s, i) => {
    if (!s.bytes || s.file < 0) return;
    if (s.stage !== "append.record" && s.stage !== "append.blank") return;
    let start = Infinity;
    let end = -Infinity;
    for (const [, a, b] of s.bytes) { start = Math.min(start, a); end = Math.max(end, b); }
    out[s.file].push({ step: i, start, end, blank: s.stage === "append.blank" });
  });
  return out;
}

function pct(v, size) { return `${size > 0 ? clamp((100 * v) / size, 0, 100) : 0}%`; }

function render({ model, el }) {
  const root = h("div", { class: "rmq-view rmq-ppp", "data-testid": "put-path-player", tabindex: "0" });
  el.appendChild(root);

  let steps = [];
  let files = [];
  let boxes = [];
  let lanes = DEFAULT_LANES;
  let table = [];
  let frame = new Uint8Array(0);
  let frameSpans = [];
  let appends = [];
  let i = 0;
  let timer = null;
  let playing = false;

  // -- static skeleton -----------------------------------------------------------------------
  const title = h("span", { class: "rmq-ppp-title" });
  const subtitle = h("span", { class: "rmq-muted rmq-ppp-sub" });
  const btnBack = h("button", { "data-testid": "step-back", title: "step back (←)", text: "◀ back" });
  const btnPlay = h("button", { "data-testid": "play", title: "play (space)", text: "▶ play" });
  const btnPause = h("button", { "data-testid": "pause", title: "pause (space)", text: "❚❚ pause" });
  const btnFwd = h("button", { "data-testid": "step-forward", title: "step forward (→)", text: "step ▶" });
  const scrub = h("input", { type: "range", "data-testid": "scrub", class: "rmq-ppp-scrub", min: "0", max: "0", step: "1", value: "0", "aria-label": "step" });
  const speed = h("select", { "data-testid": "speed", title: "steps per second", "aria-label": "speed" },
    SPEEDS.map((v) => h("option", { value: String(v), text: `${v}×` })));
  const stepIndex = h("span", { "data-testid": "step-index", class: "rmq-mono" });
  const stepCount = h("span", { class: "rmq-mono rmq-muted" });
  const stage = h("code", { "data-testid": "stage", class: "rmq-ppp-stage" });
  const thread = h("span", { class: "rmq-ppp-thread", "data-testid": "thread" });
  const tstamp = h("span", { class: "rmq-muted rmq-mono rmq-ppp-time" });
  const text = h("div", { class: "rmq-ppp-text", "data-testid": "step-text" });
  const diagram = h("div", { class: "rmq-ppp-diagram" });
  const fileLabel = h("div", { class: "rmq-ppp-file" });
  const bar = h("div", { class: "rmq-ppp-bar", "data-testid": "segment-bar" });
  const posWrote = h("span", { "data-testid": "pos-wrote", class: "rmq-mono" });
  const posCommitted = h("span", { "data-testid": "pos-committed", class: "rmq-mono" });
  const posFlushed = h("span", { "data-testid": "pos-flushed", class: "rmq-mono" });
  const positions = h("div", { class: "rmq-ppp-positions", "data-testid": "positions" },
    h("span", { class: "rmq-ppp-pk rmq-ppp-k-w" }, "wrote ", posWrote),
    h("span", { class: "rmq-ppp-pk rmq-ppp-k-c" }, "committed ", posCommitted),
    h("span", { class: "rmq-ppp-pk rmq-ppp-k-f" }, "flushed ", posFlushed));
  const strip = h("div", { class: "rmq-ppp-strip", "data-testid": "landing-bytes" });
  const frameLabel = h("div", { class: "rmq-ppp-file rmq-ppp-framelabel" });
  const frameBar = h("div", { class: "rmq-ppp-bar rmq-ppp-framebar", "data-testid": "frame-bar" });
  const frameField = h("div", { class: "rmq-ppp-framefield rmq-mono", "data-testid": "frame-field" });
  const framePanel = h("div", { class: "rmq-ppp-seg rmq-ppp-wire" }, frameLabel, frameBar, frameField);
  const fileList = h("div", { class: "rmq-ppp-files" });
  const details = h("pre", { class: "rmq-ppp-details rmq-mono" });
  const detailsBox = h("details", { class: "rmq-ppp-more" }, h("summary", { text: "event fields" }), details);

  root.append(
    h("div", { class: "rmq-ppp-head" }, title, subtitle),
    h("div", { class: "rmq-ppp-controls" }, btnBack, btnPlay, btnPause, btnFwd, scrub,
      h("label", { class: "rmq-ppp-speed" }, speed, " steps/s"),
      h("span", { class: "rmq-ppp-count" }, "step ", stepIndex, stepCount)),
    h("div", { class: "rmq-ppp-now" }, stage, thread, tstamp),
    text, diagram, framePanel,
    h("div", { class: "rmq-ppp-seg" }, fileLabel, bar, positions, strip),
    fileList, detailsBox);

  // -- data ----------------------------------------------------------------------------------
  function load() {
    steps = model.get("steps") || [];
    files = model.get("files") || [];
    boxes = model.get("boxes") || [];
    const l = model.get("lanes");
    lanes = l && l.length ? l : DEFAULT_LANES;
    table = model.get("field_table") || [];
    frame = toBytes(model.get("frame"));
    frameSpans = model.get("frame_spans") || [];
    framePanel.style.display = frame.length ? "" : "none";
    appends = appendsByFile(steps, files);
    title.textContent = model.get("title") || "put path";
    subtitle.textContent = model.get("subtitle") || "";
    scrub.max = String(Math.max(0, steps.length - 1));
    stepCount.textContent = ` of ${steps.length}`;
    const sp = Number(model.get("speed")) || 4;
    if (!SPEEDS.includes(sp)) speed.appendChild(h("option", { value: String(sp), text: `${sp}×` }));
    speed.value = String(sp);
    buildDiagram();
    i = clamp(Number(model.get("step")) || 0, 0, Math.max(0, steps.length - 1));
    show(false);
  }

  const boxEls = new Map();
  function buildDiagram() {
    clear(diagram);
    boxEls.clear();
    const used = new Map();
    for (const s of steps) used.set(s.box, (used.get(s.box) || 0) + 1);
    for (const { lane, label } of lanes) {
      const laneEl = h("div", { class: `rmq-ppp-lane rmq-ppp-lane${lane}`, "data-lane": String(lane) },
        h("span", { class: "rmq-ppp-lanelabel rmq-muted", text: label }));
      const laneBoxes = boxes.filter((b) => b.lane === lane);
      laneBoxes.forEach((b, k) => {
        const n = used.get(b.id) || 0;
        const box = h("div", {
          class: "rmq-ppp-box" + (n ? "" : " rmq-ppp-absent"), "data-box": b.id, "data-testid": "stage-box",
          title: `${b.doc || ""}\nstages: ${(b.stages || []).join(", ") || "flush"}${n ? `\n${n} step(s) in this trace` : "\nnot in this trace"}`,
          onclick: () => { const j = steps.findIndex((s, idx) => idx > i && s.box === b.id); const k2 = j >= 0 ? j : steps.findIndex((s) => s.box === b.id); if (k2 >= 0) { pause(); go(k2); } },
        }, h("span", { class: "rmq-ppp-boxlabel", text: b.label }), h("span", { class: "rmq-ppp-boxn", text: n ? String(n) : "–" }));
        boxEls.set(b.id, box);
        laneEl.appendChild(box);
        const next = laneBoxes[k + 1];
        if (next) {
          const branch = ["group_commit", "async_flush"].includes(b.id) && ["async_flush", "commit"].includes(next.id);
          laneEl.appendChild(h("span", { class: "rmq-ppp-arrow" + (branch ? " rmq-ppp-or" : ""), text: branch ? "|" : "→" }));
        }
      });
      diagram.appendChild(laneEl);
    }
  }

  // -- one step ------------------------------------------------------------------------------
  function show(animate) {
    const s = steps[i];
    stepIndex.textContent = String(i);
    scrub.value = String(i);
    btnBack.disabled = i <= 0;
    btnFwd.disabled = i >= steps.length - 1;
    btnPlay.disabled = playing || steps.length < 2;
    btnPause.disabled = !playing;
    root.classList.toggle("rmq-ppp-playing", playing);
    if (!s) {
      stage.textContent = "";
      text.textContent = "no steps";
      posWrote.textContent = posCommitted.textContent = posFlushed.textContent = "0";
      return;
    }
    stage.textContent = s.stage;
    root.setAttribute("data-stage", s.stage);
    thread.textContent = s.thread || "";
    thread.className = "rmq-ppp-thread" + (s.thread === "MainThread" ? "" : " rmq-ppp-bg");
    tstamp.textContent = `+${(s.t_us / 1000).toFixed(3)} ms`;
    text.textContent = s.text || "";
    for (const [id, box] of boxEls) {
      box.classList.toggle("active", id === s.box);
      if (id === s.box && s.thread) box.setAttribute("data-thread", s.thread);
    }
    const [w, c, f] = s.pos || [0, 0, 0];
    posWrote.textContent = String(w);
    posCommitted.textContent = String(c);
    posFlushed.textContent = String(f);
    const file = files[s.file];
    positions.setAttribute("data-file", file ? file.name : "");
    drawBar(s, file, w, c, f, animate);
    drawStrip(s);
    if (frame.length) drawFrame(s);
    drawFiles();
    details.textContent = JSON.stringify(s.fields || {}, null, 1);
  }

  function drawBar(s, file, w, c, f, animate) {
    clear(bar);
    if (!file) {
      fileLabel.textContent = "no file yet";
      return;
    }
    const size = file.size;
    fileLabel.textContent = `${file.name} · starts at offset ${fmtInt(file.from)} · ${fmtInt(size)} bytes` +
      (file.write_buffer ? " · write buffer (transient store pool)" : "");
    for (const a of appends[s.file] || []) {
      if (a.step > i) break;
      if (a.step === i) continue;
      bar.appendChild(h("div", { class: "rmq-ppp-rec" + (a.blank ? " rmq-ppp-recblank" : ""), style: { left: pct(a.start, size), width: pct(a.end - a.start, size) } }));
    }
    if (s.bytes && (s.stage === "append.record" || s.stage === "append.blank")) {
      for (const [name, a, b] of s.bytes) {
        bar.appendChild(h("div", {
          class: "rmq-ppp-byte" + (animate ? " rmq-ppp-landing" : ""), "data-field": name, title: `${name}: ${a}–${b - 1}`,
          style: { left: pct(a, size), width: pct(b - a, size), background: colorOf(table, name) },
        }));
      }
    } else if (s.bytes) {
      const [name, a, b] = s.bytes[0];
      bar.appendChild(h("div", { class: `rmq-ppp-range rmq-ppp-range-${name}` + (animate ? " rmq-ppp-landing" : ""), title: `${name} ${a}–${b}`, style: { left: pct(a, size), width: pct(b - a, size) } }));
    }
    const wb = file.write_buffer;
    bar.append(
      h("div", { class: "rmq-ppp-mark rmq-ppp-m-w", style: { left: pct(w, size) }, title: `wrote ${w}` }),
      wb || c > 0 ? h("div", { class: "rmq-ppp-mark rmq-ppp-m-c", style: { left: pct(c, size) }, title: `committed ${c}` }) : null,
      h("div", { class: "rmq-ppp-mark rmq-ppp-m-f", style: { left: pct(f, size) }, title: `flushed ${f}` }));
    bar.appendChild(h("div", { class: "rmq-ppp-flushfill", style: { width: pct(f, size) } }));
  }

  function drawStrip(s) {
    clear(strip);
    if (!s.bytes) {
      strip.appendChild(h("span", { class: "rmq-muted", text: s.records ? "" : "no bytes move in this step" }));
      return;
    }
    if (s.stage !== "append.record" && s.stage !== "append.blank") {
      const [name, a, b] = s.bytes[0];
      strip.appendChild(h("span", { class: `rmq-ppp-strip-range rmq-ppp-range-${name}`, text: `${name} [${fmtInt(a)}, ${fmtInt(b)}): ${fmtInt(b - a)} bytes` }));
      return;
    }
    const total = s.bytes.reduce((acc, [, a, b]) => acc + (b - a), 0) || 1;
    for (const [name, a, b] of s.bytes) {
      const n = b - a;
      strip.appendChild(h("span", {
        class: "rmq-ppp-field", "data-field": name, title: `${name}: bytes ${a}–${b - 1} of the file (${n} bytes)`,
        style: { flexGrow: String(Math.max(n, total / 60)), background: colorOf(table, name) },
      }, h("span", { class: "rmq-ppp-fieldname", text: name })));
    }
  }

  /** The request frame the current step is in (or the last one before it): [start, end) in `frame`. */
  function currentFrame() {
    for (let k = i; k >= 0; k--) {
      const fb = steps[k] && steps[k].frame_bytes;
      if (fb && fb[0] === "frame") return [fb[1], fb[2]];
    }
    const first = steps.find((st) => st.frame_bytes && st.frame_bytes[0] === "frame");
    return first ? [first.frame_bytes[1], first.frame_bytes[2]] : [0, frame.length];
  }

  function drawFrame(s) {
    clear(frameBar);
    clear(frameField);
    const [a, b] = currentFrame();
    const size = b - a;
    frameLabel.textContent = `request frame · ${fmtInt(size)} bytes as the broker's decoder cut them`;
    const cur = s.frame_bytes && s.frame_bytes[0] !== "frame" ? s.frame_bytes : null;
    for (const [name, x, y, color] of frameSpans) {
      if (x < a || y > b) continue;
      const on = cur && cur[0] === name && cur[1] === x;
      frameBar.appendChild(h("div", {
        class: "rmq-ppp-fspan" + (on ? " active" : ""), "data-testid": "frame-span", "data-field": name,
        title: `${name}: bytes ${x - a}–${y - a - 1}`, style: { left: pct(x - a, size), width: pct(y - x, size), background: color },
      }));
    }
    if (!s.frame_bytes) {
      frameField.appendChild(h("span", { class: "rmq-muted", text: "(the frame this put came from)" }));
      return;
    }
    const [name, x, y] = s.frame_bytes;
    const bytes = frame.subarray(x, Math.min(y, x + 48));
    const hex = Array.from(bytes, hex2).join(" ");
    const txt = Array.from(bytes, (c) => (c >= 32 && c < 127 ? String.fromCharCode(c) : "·")).join("");
    frameField.setAttribute("data-field", name);
    frameField.append(
      h("span", { class: "rmq-ppp-ffname", text: `${name} [${fmtInt(x - a)}, ${fmtInt(y - a)}) ` }),
      h("span", { class: "rmq-ppp-ffhex", text: hex + (y - x > 48 ? " …" : "") }),
      h("span", { class: "rmq-ppp-fftext", text: ` ${txt}` }));
  }

  function drawFiles() {
    clear(fileList);
    if (files.length < 2 || !steps[i]) return;
    const t = tableAt(steps, files, i);
    files.forEach((file, k) => {
      if (!t.seen[k]) return;
      const [w, c, f] = t.rows[k];
      fileList.appendChild(h("div", { class: "rmq-ppp-frow" + (steps[i].file === k ? " current" : ""), "data-file": file.name },
        h("span", { class: "rmq-mono rmq-ppp-fname", text: file.name.replace(/^0+(?=\d{6})/, "…") }),
        h("div", { class: "rmq-ppp-fbar" },
          h("div", { class: "rmq-ppp-fw", style: { width: pct(w, file.size) } }),
          c > 0 ? h("div", { class: "rmq-ppp-fc", style: { width: pct(c, file.size) } }) : null,
          h("div", { class: "rmq-ppp-ff", style: { width: pct(f, file.size) } })),
        h("span", { class: "rmq-mono rmq-muted rmq-ppp-fvals", text: `w ${w} c ${c} f ${f}` })));
    });
  }

  // -- navigation ----------------------------------------------------------------------------
  function go(j, animate = true) {
    j = clamp(j, 0, Math.max(0, steps.length - 1));
    const forward = j === i + 1;
    i = j;
    show(animate && forward);
    if (model.get("step") !== i) {
      model.set("step", i);
      model.save_changes();
    }
  }

  function tick() {
    timer = null;
    if (!playing) return;
    if (i >= steps.length - 1) { pause(); return; }
    go(i + 1);
    schedule();
  }

  function schedule() {
    const sp = Number(speed.value) || 4;
    timer = setTimeout(tick, 1000 / sp);
  }

  function play() {
    if (playing || steps.length < 2) return;
    if (i >= steps.length - 1) go(0, false);
    playing = true;
    show(false);
    schedule();
  }

  function pause() {
    playing = false;
    if (timer) { clearTimeout(timer); timer = null; }
    show(false);
  }

  btnPlay.addEventListener("click", play);
  btnPause.addEventListener("click", pause);
  btnFwd.addEventListener("click", () => { pause(); go(i + 1); });
  btnBack.addEventListener("click", () => { pause(); go(i - 1, false); });
  scrub.addEventListener("input", () => go(Number(scrub.value), false));
  scrub.addEventListener("change", () => go(Number(scrub.value), false));
  speed.addEventListener("change", () => {
    model.set("speed", Number(speed.value));
    model.save_changes();
    if (playing) { clearTimeout(timer); schedule(); }
  });
  root.addEventListener("keydown", (ev) => {
    if (ev.target !== root) return;
    if (ev.key === "ArrowRight") { pause(); go(i + 1); ev.preventDefault(); }
    else if (ev.key === "ArrowLeft") { pause(); go(i - 1, false); ev.preventDefault(); }
    else if (ev.key === " ") { (playing ? pause : play)(); ev.preventDefault(); }
  });

  const onStep = () => { const j = Number(model.get("step")) || 0; if (j !== i) { i = clamp(j, 0, Math.max(0, steps.length - 1)); show(false); } };
  const onSteps = () => { pause(); load(); };
  const onSpeed = () => { speed.value = String(model.get("speed")); };
  model.on("change:step", onStep);
  model.on("change:steps", onSteps);
  model.on("change:speed", onSpeed);
  load();
  if (model.get("autoplay")) play();

  return () => {
    pause();
    model.off("change:step", onStep);
    model.off("change:steps", onSteps);
    model.off("change:speed", onSpeed);
    root.remove();
  };
}

export default { render };
