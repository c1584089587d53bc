// anywidget entry: thin glue between the synced traits (see src/attnscope/widget.py) and the views.
import "./widget.css";
import "./analysis_view.css";
import { createHeadMapView, createHeadScatterView, createMatrixView } from "./analysis_view.js";
import { createChannel } from "./channel.js";
import { TRAITS } from "./contract.js";
import { decodeArray } from "./codec.js";
import { el } from "./dom.js";
import { createHeadView } from "./head_view.js";
import { createModelView } from "./model_view.js";
import { createNeuronView } from "./neuron_view.js";
import { resolveTheme, watchJupyterTheme } from "./theme.js";

const EDIT_DEBOUNCE_MS = 350;
const FILTERS = [
  ["all", "All"],
  ["aa", "Sentence A → A"],
  ["bb", "Sentence B → B"],
  ["ab", "Sentence A → B"],
  ["ba", "Sentence B → A"],
];
const VIEWS = [["head", "Head"], ["model", "Model"], ["neuron", "Neuron"], ["rollout", "Rollout"],
  ["analysis", "Analysis"]];
const PARTS = [["encoder", "Encoder"], ["decoder", "Decoder"], ["cross", "Cross (decoder → encoder)"]];

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
  const tabs = el("div", "attnscope-tabs", header);
  tabs.setAttribute("role", "tablist");
  for (const [value, text] of VIEWS) {
    const tab = el("button", "attnscope-tab", tabs);
    tab.type = "button";
    tab.dataset.view = value;
    tab.textContent = text;
    tab.setAttribute("role", "tab");
    tab.addEventListener("click", () => setTraits({ view: value }));
  }
  // Encoder-decoder models: which attention to show (as BertViz's Encoder / Decoder / Cross).
  const partSelect = el("select", "attnscope-part");
  for (const [value, text] of PARTS) {
    const option = el("option", "", partSelect);
    option.value = value;
    option.textContent = text;
  }
  const partControl = labelled(header, "Attention", partSelect);
  partSelect.addEventListener("change", () => setTraits({ attention_part: partSelect.value }));
  const layerSelect = el("select", "attnscope-layer");
  const layerControl = labelled(header, "Layer", layerSelect);
  const filterSelect = el("select", "attnscope-filter");
  const filterControl = labelled(header, "Attention", filterSelect);
  for (const [value, text] of FILTERS) {
    const option = el("option", "", filterSelect);
    option.value = value;
    option.textContent = text;
  }
  const wordsBox = el("input", "attnscope-words");
  wordsBox.type = "checkbox";
  const wordsControl = labelled(header, "Words", wordsBox);
  wordsControl.title = "Merge wordpieces into words: attention to a word is summed over its pieces, from a word averaged.";
  wordsBox.addEventListener("change", () => setTraits({ word_level: wordsBox.checked }));
  const exportBox = el("span", "attnscope-export", header);
  const exportButtons = ["svg", "png"].map((format) => {
    const button = el("button", "attnscope-export-button", exportBox);
    button.type = "button";
    button.dataset.format = format;
    button.textContent = format.toUpperCase();
    button.title = `Save this view as ${format.toUpperCase()}`;
    button.addEventListener("click", () => downloadImage(format));
    return button;
  });
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

  // Head masking (Michel et al.): switch heads off in the model view; the kernel reruns.
  const maskBar = el("div", "attnscope-maskbar", root);
  const maskModeBox = el("input", "attnscope-mask-mode");
  maskModeBox.type = "checkbox";
  const maskModeControl = labelled(maskBar, "Click to mask heads", maskModeBox);
  const changeBox = el("input", "attnscope-show-change");
  changeBox.type = "checkbox";
  const changeControl = labelled(maskBar, "Show change |A_masked − A|", changeBox);
  const unmask = el("button", "attnscope-unmask", maskBar);
  unmask.type = "button";
  unmask.textContent = "Unmask all";
  const maskSummary = el("span", "attnscope-mask-summary", maskBar);
  let maskMode = false;
  maskModeBox.addEventListener("change", () => { maskMode = maskModeBox.checked; schedule(); });
  changeBox.addEventListener("change", () => setTraits({ show_change: changeBox.checked }));
  unmask.addEventListener("click", () => setTraits({ masked_heads: [], show_change: false }));

  const notice = el("div", "attnscope-notice", root);
  const error = el("div", "attnscope-error", root);
  error.setAttribute("role", "alert");
  const headBody = el("div", "attnscope-body", root);
  const modelBody = el("div", "attnscope-body", root);
  const neuronBody = el("div", "attnscope-body", root);
  const rolloutBody = el("div", "attnscope-body", root);
  const analysisBody = el("div", "attnscope-body", root);
  const analysisNote = el("div", "attnscope-hint", analysisBody);
  const heatmapBox = el("div", "", analysisBody);
  const scatterBox = el("div", "", analysisBody);

  let lastSentId = 0;
  let editTimer = null;
  let frame = null;
  const decoded = new Map(); // trait name → {payload, value}: decode each payload once
  const neuron = { cache: new Map(), pending: new Set() };
  // The kernel asks the view for images (save_image); the view asks the kernel for neuron numbers.
  const channel = createChannel(model, {
    image: async ({ format }) => ({ content: { format }, buffers: [(await imageBytes(format)).buffer] }),
  });

  function setTraits(values) {
    for (const [name, value] of Object.entries(values)) model.set(name, value);
    model.save_changes();
    schedule();
  }

  const headView = createHeadView(headBody, {
    onToggleHead(h) {
      const heads = new Set(model.get("heads"));
      if (heads.has(h)) heads.delete(h); else heads.add(h);
      setTraits({ heads: [...heads].sort((a, b) => a - b) });
    },
    onSoloHead(h) {
      const heads = model.get("heads");
      const all = [...Array(model.get("n_heads")).keys()];
      setTraits({ heads: heads.length === 1 && heads[0] === h ? all : [h] });
    },
  });
  const openHead = (layer, head) => setTraits({ view: "head", layer, heads: [head] });
  const modelView = createModelView(modelBody, {
    onOpenHead: openHead,
    onToggleMask(layer, head) {
      const current = model.get("masked_heads") ?? [];
      const masked = current.filter(([l, h]) => !(l === layer && h === head));
      if (masked.length === current.length) masked.push([layer, head]);
      setTraits({ masked_heads: masked });
    },
  });
  const rolloutView = createMatrixView(rolloutBody);
  const heatmapView = createHeadMapView(heatmapBox, { onOpenHead: openHead });
  const scatterView = createHeadScatterView(scatterBox, { onOpenHead: openHead });
  const neuronView = createNeuronView(neuronBody, {
    onQuery: (query) => setTraits({ neuron_query: query }),
    onHead: (head) => setTraits({ neuron_head: head }),
  });

  // The neuron view's numbers come on request, one query at a time, as float16 buffers.
  function neuronKey() {
    return [model.get("result_id"), model.get("layer"), model.get("neuron_head"), model.get("neuron_query"),
      model.get("tokens").length, (model.get("parts") ?? []).length > 1 ? model.get("attention_part") : ""].join(":");
  }
  function neuronData() {
    const key = neuronKey();
    if (neuron.cache.has(key)) return neuron.cache.get(key);
    if (!neuron.pending.has(key)) {
      neuron.pending.add(key);
      const params = { layer: model.get("layer"), head: model.get("neuron_head"), query: model.get("neuron_query") };
      channel.request("neuron", params).then(({ content: msg, buffers }) => {
        const [query, keys, products, scores, softmax] = msg.shapes.map((shape, i) =>
          decodeArray({ data: buffers[i], dtype: "float16", shape }).values);
        // Filed under what the kernel answered, so an answer for an older run is never shown as current.
        const answered = [msg.result_id, msg.layer, msg.head, msg.query, msg.n_queries ?? msg.n_tokens, msg.part ?? ""].join(":");
        neuron.cache.set(answered, { query, keys, products, scores, softmax, d: msg.d, scoreLabel: msg.score_label });
      }).catch((err) => {
        neuron.cache.set(key, { error: err.message });
      }).finally(() => {
        neuron.pending.delete(key);
        schedule();
      });
    }
    return null;
  }

  // Image export: the open view's scene, drawn as SVG or (on a canvas, as on screen) as PNG.
  function currentImage() {
    const view = model.get("view");
    const name = model.get("model_name");
    const layer = model.get("layer") + 1;
    const scatter = model.get("analysis")?.kind === "head_distances";
    const images = {
      head: [headView, `${name} · layer ${layer}`],
      model: [modelView, name],
      rollout: [rolloutView, `${name} · attention rollout`],
      analysis: [scatter ? scatterView : heatmapView, name],
      neuron: [neuronView, `${name} · layer ${layer}`],
    };
    if (!images[view]) throw new Error(`no image of the ${view} view`);
    const [shown, title] = images[view];
    return { shown, options: { title, dark: root.classList.contains("attnscope-dark") } };
  }
  async function imageBytes(format) {
    const { shown, options } = currentImage();
    return format === "svg" ? new TextEncoder().encode(shown.toSvg(options)) : shown.toPng(options);
  }
  async function downloadImage(format) {
    try {
      const bytes = await imageBytes(format);
      const url = URL.createObjectURL(new Blob([bytes], { type: format === "svg" ? "image/svg+xml" : "image/png" }));
      const link = el("a", "", root);
      link.href = url;
      link.download = `attnscope-${model.get("view")}.${format}`;
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      showError(`cannot save the image: ${err.message}`);
    }
  }
  function sendEdit() {
    clearTimeout(editTimer);
    editTimer = null;
    lastSentId = Math.max(lastSentId, model.get("result_id")) + 1;
    const encoderDecoder = (model.get("parts") ?? []).length > 1;
    const hasB = model.get("text_b") !== null || (encoderDecoder && inputB.value.trim() !== "");
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
  layerSelect.addEventListener("change", () => setTraits({ layer: Number(layerSelect.value) }));
  filterSelect.addEventListener("change", () => setTraits({ sentence_filter: filterSelect.value }));

  function syncInput(input, value) {
    // Never overwrite what the user is typing.
    const typing = document.activeElement === input && (editTimer !== null || lastSentId > model.get("result_id"));
    if (!typing && input.value !== (value ?? "")) input.value = value ?? "";
  }

  function decodeTrait(name) {
    const payload = model.get(name);
    const hit = decoded.get(name);
    if (hit?.payload === payload) return hit.value;
    const value = decodeArray(payload);
    decoded.set(name, { payload, value });
    return value;
  }

  function showError(message) {
    error.textContent = `attnscope cannot draw this data: ${message}`;
    error.hidden = false;
  }

  function keyTokens() {
    const keys = model.get("key_tokens");
    return keys?.length ? keys : null; // cross-attention only
  }

  function drawHead(tokens, nHeads, layer, sentenceBStart) {
    const payload = model.get("attention");
    if (!payload || payload.layer !== layer) return "loading layer…";
    const attention = decodeTrait("attention");
    const [h, t1, t2] = attention.shape;
    const keys = keyTokens();
    if (h !== nHeads || t1 !== tokens.length || t2 !== (keys ?? tokens).length) {
      throw new Error(`attention of shape [${attention.shape}] does not match ${nHeads} heads × ${tokens.length} tokens`);
    }
    headView.update({
      tokens,
      keyTokens: keys,
      causal: Boolean(model.get("causal")),
      sentenceBStart,
      attention,
      visibleHeads: model.get("heads"),
      sentenceFilter: sentenceBStart === null ? "all" : model.get("sentence_filter"),
    });
    return "";
  }

  function drawModel(tokens, nHeads) {
    const payload = model.get("thumbnails");
    if (!payload?.data) return "loading thumbnails…";
    const thumbnails = decodeTrait("thumbnails");
    if (payload.n_tokens !== tokens.length) return "loading thumbnails…";
    modelView.update({ thumbnails, layers: payload.layers, heads: payload.heads, nHeads,
      masked: model.get("masked_heads") ?? [], maskMode });
    return "";
  }

  function drawRollout(tokens) {
    const payload = model.get("rollout");
    if (payload?.error) return payload.error;
    if (!payload?.data || payload.n_tokens !== tokens.length) return "loading rollout…";
    const rollout = decodeTrait("rollout");
    rolloutView.update({
      title: "Attention rollout (Abnar & Zuidema 2020): how much each input token (column) flows into each position (row) after the chosen layer",
      tokens, values: rollout.values, shape: rollout.shape, layer: rollout.shape[0] - 1,
      layerLabel: (i) => `Rolled out through layer ${i + 1}`,
    });
    return "";
  }

  function drawAnalysis() {
    const analysis = model.get("analysis");
    if (!analysis?.kind) {
      analysisNote.textContent = "No analysis yet: call widget.show_analysis(attnscope.head_stats(model, texts)).";
      heatmapBox.hidden = scatterBox.hidden = true;
      return "";
    }
    analysisNote.textContent = analysis.note;
    const isScatter = analysis.kind === "head_distances";
    heatmapBox.hidden = isScatter;
    scatterBox.hidden = !isScatter;
    const nLayers = analysis.n_layers;
    const nHeads = analysis.n_heads;
    if (isScatter) {
      const thumbs = model.get("thumbnails");
      const complete = thumbs?.data && thumbs.layers.length === nLayers && thumbs.heads.length === nHeads;
      scatterView.update({ nLayers, nHeads, points: Float32Array.from(analysis.points),
        behaviours: analysis.behaviours, colorBy: "behaviour", thumbnails: complete ? decodeTrait("thumbnails") : null });
    } else {
      const measures = analysis.measures.map((m) => ({ key: m.key, label: m.label, max: m.max,
        values: Float32Array.from(m.values, (v) => (v === null ? NaN : v)) }));
      heatmapView.update({ nLayers, nHeads, measures, measure: analysis.measure });
    }
    return "";
  }

  function drawNeuron(tokens, nHeads) {
    const base = { tokens, keyTokens: keyTokens(), nHeads, head: model.get("neuron_head"), query: model.get("neuron_query") };
    if (model.get("word_level")) {
      neuronView.update({ ...base, data: null, message: "The neuron view is per token: switch off Words to see it." });
      return "";
    }
    if (!model.get("has_queries_keys")) {
      neuronView.update({ ...base, data: null, message: "This model's queries and keys could not be captured." });
      return "";
    }
    const data = neuronData();
    if (data?.error) {
      neuronView.update({ ...base, data: null, message: data.error });
      return "";
    }
    if (!data) return "loading…";
    neuronView.update({ ...base, data, message: "" });
    return "";
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
        option.textContent = String(l + 1); // shown 1-based as in the papers; the trait is 0-based
      }
    }
    layerSelect.value = String(layer);
    filterSelect.value = model.get("sentence_filter");
    sentenceB.hidden = model.get("text_b") === null && (model.get("parts") ?? []).length < 2;
    // After a failed edit the inputs keep what the user typed, so it can be fixed, not retyped.
    const failedEdit = Boolean(model.get("error")) && lastSentId > 0 && model.get("result_id") === lastSentId;
    if (!failedEdit) {
      syncInput(inputA, model.get("text"));
      syncInput(inputB, model.get("text_b"));
    }
    // Precomputed attention (BertViz-style calls) has no model to rerun: no sentence editor then.
    editor.hidden = model.get("editable") === false;
    notice.textContent = model.get("notice");
    notice.hidden = !model.get("notice");
    error.textContent = model.get("error");
    error.hidden = !model.get("error");

    const view = model.get("view");
    for (const tab of tabs.children) tab.setAttribute("aria-selected", String(tab.dataset.view === view));
    headBody.hidden = view !== "head";
    modelBody.hidden = view !== "model";
    neuronBody.hidden = view !== "neuron";
    rolloutBody.hidden = view !== "rollout";
    analysisBody.hidden = view !== "analysis";
    for (const tab of tabs.children) {
      if (tab.dataset.view === "analysis") tab.hidden = !model.get("analysis")?.kind;
    }
    filterControl.hidden = sentenceBStart === null || view !== "head";
    const parts = model.get("parts") ?? [];
    partControl.hidden = parts.length < 2 || view === "analysis";
    partSelect.value = model.get("attention_part") ?? "encoder";
    // An encoder-decoder model reads sentence B as the decoder's text (e.g. a translation).
    sentenceB.firstChild.textContent = parts.length > 1 ? "Decoder text" : "Sentence B";
    layerControl.hidden = view === "model" || view === "analysis" || view === "rollout";
    wordsBox.checked = Boolean(model.get("word_level"));
    wordsControl.hidden = view === "analysis";
    const masked = model.get("masked_heads") ?? [];
    maskBar.hidden = !(view === "model" || ((view === "head" || view === "rollout") && masked.length > 0));
    maskModeBox.checked = maskMode;
    maskModeControl.hidden = view !== "model";
    changeBox.checked = Boolean(model.get("show_change"));
    changeControl.hidden = masked.length === 0;
    unmask.hidden = masked.length === 0;
    maskSummary.textContent = model.get("mask_summary") ?? "";
    for (const button of exportButtons) button.disabled = view === "neuron" && !model.get("has_queries_keys");

    const computing = editTimer !== null || lastSentId > model.get("result_id");
    if (computing) {
      // Stale data (an older edit) is never drawn: the last good drawing stays.
      status.textContent = "computing…";
      return;
    }
    try {
      if (view === "model") status.textContent = drawModel(tokens, nHeads);
      else if (view === "neuron") status.textContent = drawNeuron(tokens, nHeads);
      else if (view === "rollout") status.textContent = drawRollout(tokens);
      else if (view === "analysis") status.textContent = drawAnalysis();
      else status.textContent = drawHead(tokens, nHeads, layer, sentenceBStart);
    } catch (err) {
      status.textContent = "";
      showError(err.message);
    }
  }

  // Several traits change in one kernel message: draw once per animation frame.
  function schedule() {
    if (frame === null) frame = requestAnimationFrame(draw);
  }
  const events = TRAITS.map((name) => `change:${name}`);
  for (const event of events) model.on(event, schedule);
  const stopWatchingTheme = watchJupyterTheme(schedule);
  channel.notify("rendered"); // the kernel's save_image needs a view that can answer
  draw();

  return () => {
    for (const event of events) model.off(event, schedule);
    channel.destroy();
    stopWatchingTheme();
    clearTimeout(editTimer);
    if (frame !== null) cancelAnimationFrame(frame);
    headView.destroy();
    modelView.destroy();
    neuronView.destroy();
    rolloutView.destroy();
    heatmapView.destroy();
    scatterView.destroy();
    root.remove();
  };
}

export default { render };
