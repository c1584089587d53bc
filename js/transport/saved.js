// A saved page's state (export.page_state) and the kernel's answers it holds, read without a
// DOM: the saved page's static model (standalone.js) and the kernel's picture of a view
// (picture.js) both use these.
import { base64Decode } from "../drawing/base64.js";
import { halfToFloat } from "./codec.js";

// A saved page (a file, the iframe of a slide) is a copy of the widget with no model to rerun:
// what needs the model is said to need the live widget, never a kernel (one may well be running
// beside a slide, and a slide still cannot reach it).
export const SAVED_COPY_NOTE = "A saved copy of the widget: edit the text in the live widget.";
export const SAVED_COPY_TITLE = "This saved copy cannot rerun the model: edit the text in the live widget, in the notebook.";

/** "<what> needs the live widget: this saved copy cannot rerun the model." */
export const needsLiveWidget = (what) => `${what} needs the live widget: this saved copy cannot rerun the model.`;

/** The page's JSON with each binary part back at its path, as a DataView (what anywidget gives);
 * bytesOf(data) reads a part (base64 in a saved page). copy: false writes into `json` itself, for
 * a caller that owns it (the picture: QuickJS has no structuredClone, and a copy of 32,768 tokens'
 * state through JSON took 30 ms there). */
export function withBuffers(json, buffers, bytesOf = base64Decode, { copy = true } = {}) {
  const value = !copy ? json : globalThis.structuredClone ? structuredClone(json) : JSON.parse(JSON.stringify(json));
  for (const { path, data } of buffers) {
    let parent = value;
    for (const key of path.slice(0, -1)) parent = parent[key];
    parent[path.at(-1)] = new DataView(bytesOf(data).buffer);
  }
  return value;
}

/**
 * One layer's, head's and query's inputs of the neuron maths (float16 buffers named in
 * content.inputs, with their shapes, scaling and causal), cut from a neuron store
 * (export.neuron_store): the live view's, a layer the kernel answered, and a saved page's, every
 * layer it holds, are cut here alike, so the numbers neuron_maths.js computes are the same bytes'.
 * {content, buffers} or {error}.
 */
export function neuronAnswer(store, request, state) {
  const { layer, head, query } = request;
  const slot = store.layers.indexOf(layer);
  if (slot < 0) return { error: `Layer ${layer} is not in this saved page (it holds layers ${store.layers.join(", ")}).` };
  const [, nHeads, nQueries, d] = store.queries.shape;
  const [, nKeyHeads, n] = store.keys.shape; // cross-attention: the keys are the encoder's tokens
  if (!(head >= 0 && head < nHeads)) return { error: `head=${head} is out of range 0..${nHeads - 1}.` };
  if (!(query >= 0 && query < nQueries)) return { error: `query_index=${query} is out of range 0..${nQueries - 1}.` };
  const keyHead = Math.floor(head / (store.key_group ?? 1)); // grouped-query: the key-value head h reads
  // Each input: [stored part, offset of its first float16, count, shape].
  const parts = {
    query: [store.queries, ((slot * nHeads + head) * nQueries + query) * d, d, [d]],
    keys: [store.keys, (slot * nKeyHeads + keyHead) * n * d, n * d, [n, d]],
    bias: [store.bias, ((slot * nHeads + head) * nQueries + query) * n, n, [n]],
    values: [store.values, (slot * nKeyHeads + keyHead) * n * d, n * d, [n, d]],
    norms: [store.norms, (slot * nHeads + head) * n, n, [n]],
  };
  const inputs = ["query", "keys", "bias", "values", "norms"].filter((name) => parts[name][0]);
  const cut = ([part, start, count]) => {
    const at = part.data.byteOffset + 2 * start;
    return new DataView(part.data.buffer.slice(at, at + 2 * count));
  };
  return {
    content: { layer, head, query, d, n_tokens: n, score_label: store.score_labels[String(layer)], scaling: store.scaling[layer],
      causal: store.causal, sink: null, inputs, shapes: inputs.map((name) => parts[name][3]),
      n_queries: store.n_queries, part: store.part, shown: state.compared_model ? state.compare_shown : "", result_id: state.result_id },
    buffers: inputs.map((name) => cut(parts[name])),
  };
}

/**
 * A long run's saved answers (export._long_page_state): the kernel's own answer to a request with
 * the same parameters, a generation's kept step (stepAnswer), or why the page cannot answer.
 * served: {answers, steps?}.
 */
export function savedAnswer(served, request, state) {
  const same = (saved) => saved.type === request.type &&
    Object.entries(saved.request).every(([key, value]) => JSON.stringify(request[key]) === JSON.stringify(value));
  const found = (served?.answers ?? []).find(same);
  if (found) return { content: { ...found.content, result_id: state.result_id }, buffers: [found.buffer] };
  const step = served?.steps ? stepAnswer(served.steps, request, state) : null;
  if (step) return step;
  const what = request.type === "attention_tile" ? "Zooming in or another layer" : "Another token, layer or direction";
  // What the page holds, as it was saved: the state now is the reader's new choice, which it does not hold.
  const held = (served?.answers ?? []).find((saved) => saved.type === "attention_rows")?.request
    ?? { layer: state.layer, direction: state.direction, token: state.focus_token };
  return { error: `This saved page holds layer ${held.layer}'s whole maps and the attention ${held.direction} token ${held.token}. ${needsLiveWidget(what)}` };
}

/** Element i of a saved part ({data: DataView, dtype}): a key (uint16 or uint32) or a weight. */
function readAt(part, i) {
  const { data, dtype } = part;
  if (dtype === "uint16") return data.getUint16(2 * i, true);
  if (dtype === "uint32") return data.getUint32(4 * i, true);
  if (dtype === "float16") return halfToFloat(data.getUint16(2 * i, true));
  return data.getFloat32(4 * i, true);
}

// A share as the page says it (long_answers._percent): 97%, 99.6%, 100%.
const percent = (share) => (share >= 0.9995 ? "100%" : `${(100 * share).toFixed(share >= 0.995 ? 1 : 0)}%`);

/**
 * A generation's kept steps (long_answers.step_rows): the answer to a step's row ("attention_rows"
 * from an output token) or to the head view's window around it ("attention_window": the kept rows in
 * it), rebuilt from each row's largest weights, the others 0, with a `note` that says what was kept;
 * {error} for a token whose row this page does not keep; null for what the steps do not hold (a
 * tile, a column: the caller says it needs the live widget).
 */
export function stepAnswer(steps, request, state) {
  const { first, kept, n_tokens: n } = steps;
  const { type, layer, token } = request;
  const rows = type === "token_rows"; // the model view's: every kept layer × head
  if (!((type === "attention_rows" && request.direction === "from") || type === "attention_window" || rows)) return null;
  const at = rows ? 0 : steps.layers.indexOf(layer);
  const step = token - first; // 0: the first token the model wrote
  const whose = `Token ${token} ${token < first ? "is in the prompt" : `(step ${step + 1})`}`;
  if (at < 0) return { error: `Layer ${layer} is not in this saved page (it keeps layers ${steps.layers.join(", ")}). ${needsLiveWidget("Another layer")}` };
  if (!(token >= first && step < kept)) {
    const which = kept ? `the rows of steps 1–${kept} (tokens ${first}–${first + kept - 1})` : "no output token's row";
    const more = token >= first ? `: steps after ${kept} of ${steps.steps} are not kept` : "";
    return { error: `${whose}${more}. This saved page keeps ${which}: ${needsLiveWidget("its row")}` };
  }
  const nHeads = steps.n_heads;
  // Row (layer slot, head or -1, step) into `values` at `offset`, its keys in [lo, hi) at key − lo.
  function fill(values, offset, head, s, lo, hi, slot = at) {
    const part = head < 0 ? steps.mean : steps.heads;
    const k = head < 0 ? steps.mean_keys : steps.head_keys;
    const row = head < 0 ? slot * kept + s : (slot * nHeads + head) * kept + s;
    for (let r = 0; r < k; r++) {
      const key = readAt(part.keys, row * k + r);
      if (key >= lo && key < hi) values[offset + key - lo] = readAt(part.weights, row * k + r);
    }
    return readAt(part.share, row);
  }
  const base = { layer, token, n_tokens: n, dtype: "float32", result_id: state.result_id, weigh_by: state.weigh_by };
  if (rows) return keptTokenRows(steps, request, base, (values, offset, head, slot) => fill(values, offset, head, step, 0, n, slot));
  if (type === "attention_rows") {
    const { head } = request;
    if (!(head >= -1 && head < nHeads)) return { error: `head=${head} is out of range -1..${nHeads - 1}.` };
    const values = new Float32Array(n);
    const share = fill(values, 0, head, step, 0, n);
    const k = head < 0 ? steps.mean_keys : steps.head_keys;
    return { content: { ...base, head, direction: "from", shape: [n],
      note: `This saved page keeps this row's ${k} largest weights (${percent(share)} of its weight); the others show as 0.` },
    buffers: [new DataView(values.buffer)] };
  }
  const start = steps.window_starts[step];
  const end = Math.min(n, start + steps.window_tokens);
  const size = end - start;
  const values = new Float32Array(nHeads * size * size);
  for (let q = Math.max(start, first); q < Math.min(end, first + kept); q++) {
    for (let h = 0; h < nHeads; h++) fill(values, (h * size + q - start) * size, h, q - first, start, end);
  }
  return { content: { ...base, rows: [start, end], shape: [nHeads, size, size],
    note: `This saved page keeps the output tokens' rows, each head's ${steps.head_keys} largest weights: lines from the prompt's tokens are not drawn.` },
  buffers: [new DataView(values.buffer)] };
}

/**
 * A kept step's "token_rows" answer (the model view's cells): its row in every kept layer × head
 * the request includes (layers, heads: null for all), [layers, heads, 1, T] as the kernel's
 * (long_answers.token_rows_payload), rebuilt from each row's largest weights.
 * base: the answer's run, weighing and token count; fill(values, offset, head, layer slot) writes one row and gives the share of its weight kept.
 */
function keptTokenRows(steps, request, base, fill) {
  const n = base.n_tokens;
  const wanted = (list, all) => (Array.isArray(list) && list.length ? all.filter((x) => list.includes(x)) : all);
  const layers = wanted(request.layers, steps.layers);
  const heads = request.heads === null || request.heads === undefined ? [...Array(steps.n_heads).keys()]
    : [...Array(steps.n_heads).keys()].filter((h) => request.heads.includes(h));
  const values = new Float32Array(layers.length * heads.length * n);
  let least = 1;
  layers.forEach((layer, i) => {
    heads.forEach((head, j) => {
      least = Math.min(least, fill(values, (i * heads.length + j) * n, head, steps.layers.indexOf(layer)));
    });
  });
  return { content: { result_id: base.result_id, weigh_by: base.weigh_by, token: request.token, layers, heads, n_tokens: n, dtype: "float32", shape: [layers.length, heads.length, 1, n],
    note: `This saved page keeps each head's ${steps.head_keys} largest weights of the row (at least ${percent(least)} of its weight); the others show as 0.` },
  buffers: [new DataView(values.buffer)] };
}
