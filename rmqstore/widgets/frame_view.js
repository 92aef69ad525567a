// FrameView: a remoting frame's bytes as a hex/ASCII grid coloured by field, and its decoded values.
// The grid, the field table and the hover/pin highlighting are RecordView's (mountRecord), fed with the
// frame's spans and rows. DOM contract: root data-testid="frame-view"; hex cells data-testid="byte"
// data-field="<span name>" (class "hl" while highlighted); rows data-testid="field" data-field="<span name>".
import { bindRecord } from "./record_view.js";

function frameState(model) {
  const data = model.get("data");
  const n = data ? (data.byteLength ?? data.length ?? 0) : 0;
  return {
    data, offset: "0", total_size: n, kind: "frame", kind_text: model.get("code") ? `frame: ${model.get("code")}` : "frame",
    version: "", msg_id: "", summary: model.get("summary"), error: model.get("error"), spans: model.get("spans"),
    rows: model.get("rows"), field_table: model.get("field_table"), selected: model.get("selected"),
    title: model.get("title"),
  };
}

function render({ model, el }) {
  return bindRecord(model, el, frameState, ["data", "spans", "rows", "field_table", "code", "summary", "error",
    "title"], "frame-view");
}

export default { render };
