// anywidget entry: thin glue between the synced traits (see src/attnscope/widget.py) and the views.
import "./widget.css";
import { decodeArray } from "./codec.js";
import { createHeadView } from "./head_view.js";
import { resolveTheme, watchJupyterTheme } from "./theme.js";

const EDIT_DEBOUNCE_MS = 350;
const FILTERS = [
  ["all", "All"],
  ["aa", "Sentence A → A"],
  ["bb", "Sentence B → B"],
  ["ab", "Sentence A → B"],
  ["ba", "Sentence B → A"],
];
const TRAITS = ["tokens", "sentence_b_start", "n_layers", "n_heads", "model_name", "layer", "attention", "heads",
  "sentence_filter", "theme", "text", "text_b", "result_id", "notice", "error"];

function el(tag, className, parent) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (parent) parent.appendChild(node);
  return node;
}

function labelled(parent, text, control) {
  const label = el("label", "attnscope-control", parent);
  el("span", "", label).textContent = text;
  label.appendChild(control);
  return label;
}

function render({ model, el: host }) {
  const root = el("div", "attnscope-root", host);
  const header = el("div", "attnscope-header", root);
  const title = el("span", "attnscope-title", header);
  const layerSelect = el("select", "attnscope-layer");
  labelled(header, "Layer", layerSelect);
  const filterSelect = el("select", "attnscope-filter");
  const filterControl = labelled(header, "Attention", filterSelect);
  for (const [value, text] of FILTERS) {
    const option = el("option", "", filterSelect);
    option.value = value;
    option.textContent = text;
  }
  const status = el("span", "attnscope-status", header);

  const editor = el("div", "attnscope-editor", root);
  const inputA = el("input", "attnscope-text");
  inputA.type = "text";
  inputA.setAttribute("aria-label", "Sentence A");
  const inputB = el("input", "attnscope-text");
  inputB.type = "text";
  inputB.setAttribute("aria-label", "Sentence B");
  labelled(editor, "Sentence", inputA);
  const sentenceB = labelled(editor, "Sentence B", inputB);

  const notice = el("div", "attnscope-notice", root);
  const error = el("div", "attnscope-error", root);
  error.setAttribute("role", "alert");
  const body = el("div", "attnscope-body", root);

  let lastSentId = 0;
  let editTimer = null;
  let frame = null;
  let decoded = { payload: null, value: null };

  const view = createHeadView(body, {
    onToggleHead(h) {
      const heads = new Set(model.get("heads"));
      if (heads.has(h)) heads.delete(h); else heads.add(h);
      model.set("heads", [...heads].sort((a, b) => a - b));
      model.save_changes();
    },
    onSoloHead(h) {
      const heads = model.get("heads");
      const all = [...Array(model.get("n_heads")).keys()];
      model.set("heads", heads.length === 1 && heads[0] === h ? all : [h]);
      model.save_changes();
    },
  });

  function sendEdit() {
    clearTimeout(editTimer);
    editTimer = null;
    lastSentId = Math.max(lastSentId, model.get("result_id")) + 1;
    const hasB = model.get("text_b") !== null;
    model.set("request", { id: lastSentId, text: inputA.value, text_b: hasB ? inputB.value : null });
    model.save_changes();
    schedule();
  }
  function onInput() {
    clearTimeout(editTimer);
    editTimer = setTimeout(sendEdit, EDIT_DEBOUNCE_MS);
    schedule();
  }
  function onKey(event) {
    if (event.key === "Enter") sendEdit();
  }
  for (const input of [inputA, inputB]) {
    input.addEventListener("input", onInput);
    input.addEventListener("keydown", onKey);
  }
  layerSelect.addEventListener("change", () => {
    model.set("layer", Number(layerSelect.value));
    model.save_changes();
    schedule();
  });
  filterSelect.addEventListener("change", () => {
    model.set("sentence_filter", filterSelect.value);
    model.save_changes();
    schedule();
  });

  function syncInput(input, value) {
    // Never overwrite what the user is typing.
    const typing = document.activeElement === input && (editTimer !== null || lastSentId > model.get("result_id"));
    if (!typing && input.value !== (value ?? "")) input.value = value ?? "";
  }

  function decodeAttention(payload) {
    if (decoded.payload !== payload) decoded = { payload, value: decodeArray(payload) };
    return decoded.value;
  }

  function draw() {
    frame = null;
    const tokens = model.get("tokens");
    const nLayers = model.get("n_layers");
    const nHeads = model.get("n_heads");
    const layer = model.get("layer");
    const sentenceBStart = model.get("sentence_b_start");
    root.classList.toggle("attnscope-dark", resolveTheme(model.get("theme"), host) === "dark");

    title.textContent = model.get("model_name");
    if (layerSelect.options.length !== nLayers) {
      layerSelect.replaceChildren();
      for (let l = 0; l < nLayers; l++) {
        const option = el("option", "", layerSelect);
        option.value = String(l);
        option.textContent = String(l);
      }
    }
    layerSelect.value = String(layer);
    filterControl.hidden = sentenceBStart === null;
    filterSelect.value = model.get("sentence_filter");
    sentenceB.hidden = model.get("text_b") === null;
    syncInput(inputA, model.get("text"));
    syncInput(inputB, model.get("text_b"));
    notice.textContent = model.get("notice");
    notice.hidden = !model.get("notice");
    error.textContent = model.get("error");
    error.hidden = !model.get("error");

    const computing = editTimer !== null || lastSentId > model.get("result_id");
    const payload = model.get("attention");
    const loadingLayer = !payload || payload.layer !== layer;
    status.textContent = computing ? "computing…" : loadingLayer ? "loading layer…" : "";
    // Stale data (an older edit, another layer) is never drawn: the last good drawing stays.
    if (computing || loadingLayer) return;
    let attention;
    try {
      attention = decodeAttention(payload);
      const [h, t1, t2] = attention.shape;
      if (h !== nHeads || t1 !== tokens.length || t2 !== tokens.length) {
        throw new Error(`attention of shape [${attention.shape}] does not match ${nHeads} heads × ${tokens.length} tokens`);
      }
    } catch (err) {
      error.textContent = `attnscope cannot draw this data: ${err.message}`;
      error.hidden = false;
      return;
    }
    view.update({
      tokens,
      sentenceBStart,
      attention,
      visibleHeads: model.get("heads"),
      sentenceFilter: sentenceBStart === null ? "all" : model.get("sentence_filter"),
    });
  }

  // Several traits change in one kernel message: draw once per animation frame.
  function schedule() {
    if (frame === null) frame = requestAnimationFrame(draw);
  }
  const events = TRAITS.map((name) => `change:${name}`);
  for (const event of events) model.on(event, schedule);
  const stopWatchingTheme = watchJupyterTheme(schedule);
  draw();

  return () => {
    for (const event of events) model.off(event, schedule);
    stopWatchingTheme();
    clearTimeout(editTimer);
    if (frame !== null) cancelAnimationFrame(frame);
    view.destroy();
    root.remove();
  };
}

export default { render };
