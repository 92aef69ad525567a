// rmqstore offline widget renderer: the views' real ESM code on a static page, no kernel, no CDN.
//
// Reads the Jupyter widget state (script elements of type application/vnd.jupyter.widget-state+json:
// the format nbclient saves in notebook metadata and ipywidgets.embed writes), rebuilds each
// model with a tiny shim of anywidget's model API -- get, set, on, off, save_changes, send --
// and renders every element with a data-rmq-model-id attribute with its model:
//   * anywidget models: the model's own `_esm` (imported from a Blob URL) and `_css`;
//   * HBox/VBox/Box/GridBox: their children in a flex box;
//   * HTML/Label/HTMLMath: their value; Output: the widgets and text it captured;
//   * anything else: a note that it needs a kernel.
// `send` has no kernel to reach: it is a no-op, and models carry `rmq_static = true` so a view
// can answer from its state instead.  Binary buffers become DataViews, as in JupyterLab.
(() => {
  const STATE_TYPE = "application/vnd.jupyter.widget-state+json";

  function b64ToDataView(b64) {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return new DataView(out.buffer);
  }

  function putBuffer(state, path, value) {
    let obj = state;
    for (let i = 0; i < path.length - 1; i++) obj = obj[path[i]];
    obj[path[path.length - 1]] = value;
  }

  class Model {
    constructor(id, spec, manager) {
      this.model_id = id;
      this.spec = spec;
      this.widget_manager = manager;
      this.rmq_static = true;
      this.attributes = JSON.parse(JSON.stringify(spec.state || {}));
      for (const buf of spec.buffers || []) {
        const data = buf.encoding === "hex" ? hexToDataView(buf.data) : b64ToDataView(buf.data);
        putBuffer(this.attributes, buf.path, data);
      }
      this._handlers = new Map();
    }
    get(name) { return this.attributes[name]; }
    set(name, value) {
      if (typeof name === "object" && name !== null) {
        for (const [k, v] of Object.entries(name)) this.set(k, v);
        return;
      }
      const old = this.attributes[name];
      this.attributes[name] = value;
      if (old !== value) {
        this._emit(`change:${name}`, this, value);
        this._emit("change", this);
      }
    }
    on(name, callback) {
      for (const n of String(name).split(/\s+/)) {
        if (!this._handlers.has(n)) this._handlers.set(n, new Set());
        this._handlers.get(n).add(callback);
      }
    }
    off(name, callback) {
      if (!name) {
        if (!callback) this._handlers.clear();
        else for (const set of this._handlers.values()) set.delete(callback);
        return;
      }
      for (const n of String(name).split(/\s+/)) {
        const set = this._handlers.get(n);
        if (!set) continue;
        if (callback) set.delete(callback); else set.clear();
      }
    }
    _emit(name, ...args) {
      const set = this._handlers.get(name);
      if (!set) return;
      for (const cb of [...set]) {
        try { cb(...args); } catch (e) { console.error(`[rmqstore] ${name} handler failed`, e); }
      }
    }
    save_changes() { /* no kernel: changes stay on the page */ }
    send(content, callbacks, buffers) { /* no kernel to send to */ }
  }

  function hexToDataView(hex) {
    const out = new Uint8Array(hex.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.substr(i * 2, 2), 16);
    return new DataView(out.buffer);
  }

  class Manager {
    constructor(state) {
      this.models = new Map();
      for (const [id, spec] of Object.entries(state.state || {})) this.models.set(id, new Model(id, spec, this));
    }
    async get_model(id) {
      const m = this.models.get(String(id).replace(/^IPY_MODEL_/, ""));
      if (!m) throw new Error(`no widget model ${id} in the saved state`);
      return m;
    }
  }

  const esmCache = new Map();
  const cssDone = new Set();
  const initialized = new WeakSet();

  async function loadEsm(esm) {
    if (!esmCache.has(esm)) {
      const url = URL.createObjectURL(new Blob([esm], { type: "text/javascript" }));
      esmCache.set(esm, import(url).finally(() => URL.revokeObjectURL(url)));
    }
    return esmCache.get(esm);
  }

  function loadCss(css, id) {
    if (!css) return;
    const key = `${id}\u0000${css.length}\u0000${css.slice(0, 64)}`;
    if (cssDone.has(key)) return;
    cssDone.add(key);
    const style = document.createElement("style");
    style.setAttribute("data-anywidget-id", id || "");
    style.textContent = css;
    document.head.appendChild(style);
  }

  async function widgetDef(mod) {
    let def = mod.default ?? mod;
    if (typeof def === "function") def = await def();
    if (!def.render && typeof mod.render === "function") def = { render: mod.render, initialize: mod.initialize };
    return def;
  }

  async function renderAny(model, el) {
    loadCss(model.get("_css"), model.get("_anywidget_id"));
    const esm = model.get("_esm");
    if (!esm) throw new Error("an anywidget model without _esm");
    const def = await widgetDef(await loadEsm(esm));
    if (def.initialize && !initialized.has(model)) {
      initialized.add(model);
      await def.initialize({ model, experimental: {} });
    }
    const host = document.createElement("div");
    host.className = "rmq-widget";
    el.appendChild(host);
    if (def.render) await def.render({ model, el: host, experimental: {} });
  }

  const BOXES = { HBoxModel: "row", VBoxModel: "column", BoxModel: "row", GridBoxModel: "row" };

  async function renderModel(manager, model, el) {
    const name = model.spec.model_name;
    const layout = model.get("layout");
    if (model.spec.model_module === "anywidget" || model.get("_esm") !== undefined) {
      return renderAny(model, el);
    }
    if (name in BOXES) {
      const box = document.createElement("div");
      box.className = "rmq-box";
      box.style.display = "flex";
      box.style.flexDirection = BOXES[name];
      box.style.gap = "12px";
      box.style.alignItems = "flex-start";
      if (name !== "VBoxModel") box.style.flexWrap = "wrap";
      el.appendChild(box);
      for (const ref of model.get("children") || []) {
        const child = document.createElement("div");
        child.style.minWidth = "0";
        if (BOXES[name] === "row") child.style.flex = "1 1 0";
        box.appendChild(child);
        try {
          await renderModel(manager, await manager.get_model(ref), child);
        } catch (e) {
          showError(child, e);
        }
      }
      return;
    }
    if (name === "HTMLModel" || name === "HTMLMathModel") {
      const div = document.createElement("div");
      div.innerHTML = model.get("value") || "";
      el.appendChild(div);
      return;
    }
    if (name === "OutputModel") {
      for (const out of model.get("outputs") || []) {
        const data = out.data || {};
        const view = data["application/vnd.jupyter.widget-view+json"];
        const child = document.createElement("div");
        el.appendChild(child);
        if (view) {
          try {
            await renderModel(manager, await manager.get_model(view.model_id), child);
          } catch (e) {
            showError(child, e);
          }
        } else {
          const pre = document.createElement("pre");
          pre.textContent = out.text || data["text/plain"] || "";
          child.appendChild(pre);
        }
      }
      return;
    }
    if (name === "LabelModel") {
      const div = document.createElement("div");
      div.textContent = model.get("value") || "";
      el.appendChild(div);
      return;
    }
    const note = document.createElement("div");
    note.className = "rmq-widget-unsupported";
    note.textContent = `[${name}: needs a running kernel]`;
    note.style.color = "#888";
    el.appendChild(note);
    void layout;
  }

  function showError(el, e) {
    console.error("[rmqstore] widget render failed", e);
    const pre = document.createElement("pre");
    pre.className = "rmq-widget-error";
    pre.style.color = "#cf222e";
    pre.textContent = `widget failed to render: ${e && e.stack ? e.stack : e}`;
    el.appendChild(pre);
  }

  async function main() {
    const scripts = document.querySelectorAll(`script[type="${STATE_TYPE}"]`);
    const state = { state: {} };
    for (const s of scripts) {
      try {
        const parsed = JSON.parse(s.textContent);
        Object.assign(state.state, parsed.state || {});
      } catch (e) { console.error("[rmqstore] bad widget state", e); }
    }
    const manager = new Manager(state);
    window.rmqWidgetManager = manager;
    const targets = [...document.querySelectorAll("[data-rmq-model-id]")];
    await Promise.all(targets.map(async (el) => {
      try {
        const model = await manager.get_model(el.getAttribute("data-rmq-model-id"));
        await renderModel(manager, model, el);
      } catch (e) {
        showError(el, e);
      }
    }));
    document.documentElement.setAttribute("data-rmq-rendered", String(targets.length));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
