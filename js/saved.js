// A saved page's state (export.page_state) and the kernel's answers it holds, read without a
// DOM: the saved page's static model (standalone.js) and the kernel's picture of a view
// (picture.js) both use these.
import { base64Decode } from "./base64.js";
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

function floatToHalf(value) {
  const f32 = new Float32Array([value]);
  const x = new Uint32Array(f32.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = ((x >>> 23) & 0xff) - 127 + 15;
  const mant = x & 0x7fffff;
  if (((x >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 0x1f) return sign | 0x7c00;
  if (exp <= 0) return exp < -10 ? sign : sign | ((mant | 0x800000) >> (1 - exp + 13));
  return sign | (exp << 10) | (mant >> 13);
}

function toHalfView(values) {
  const words = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) words[i] = floatToHalf(values[i]);
  return new DataView(words.buffer);
}

/**
 * The kernel's answer to a "neuron" request (payloads.neuron_payload), computed from the stored
 * float16 queries and keys of the saved layers: {content, buffers} or {error}.
 */
export function neuronAnswer(store, request, state) {
  const { layer, head, query } = request;
  const slot = store.layers.indexOf(layer);
  if (slot < 0) return { error: `Layer ${layer} is not in this saved page (it holds layers ${store.layers.join(", ")}).` };
  const [, nHeads, nQueries, d] = store.queries.shape;
  const n = store.keys.shape[2]; // cross-attention: the keys are the encoder's tokens
  if (!(head >= 0 && head < nHeads)) return { error: `head=${head} is out of range 0..${nHeads - 1}.` };
  if (!(query >= 0 && query < nQueries)) return { error: `query_index=${query} is out of range 0..${nQueries - 1}.` };
  const at = (view, count, t, k) => halfToFloat(view.getUint16(2 * (((slot * nHeads + head) * count + t) * d + k), true));
  const q = Float32Array.from({ length: d }, (_, k) => at(store.queries.data, nQueries, query, k));
  const keys = new Float32Array(n * d);
  const products = new Float32Array(n * d);
  const scores = new Float32Array(n);
  for (let j = 0; j < n; j++) {
    let dot = 0;
    for (let k = 0; k < d; k++) {
      const kv = at(store.keys.data, n, j, k);
      keys[j * d + k] = kv;
      products[j * d + k] = kv * q[k];
      dot += kv * q[k];
    }
    const bias = store.bias ? halfToFloat(store.bias.data.getUint16(2 * (((slot * nHeads + head) * nQueries + query) * n + j), true)) : 0;
    scores[j] = store.causal && j > query ? -Infinity : dot * store.scaling[layer] + bias;
  }
  const max = Math.max(...scores);
  const exps = scores.map((s) => Math.exp(s - max));
  const total = exps.reduce((a, b) => a + b, 0);
  const softmax = exps.map((e) => e / total);
  return {
    content: { layer, head, query, d, n_tokens: n, n_queries: store.n_queries, part: store.part,
      shown: state.compared_model ? state.compare_shown : "", result_id: state.result_id, score_label: store.score_labels[String(layer)], shapes: [[d], [n, d], [n, d], [n], [n]] },
    buffers: [q, keys, products, scores, softmax].map(toHalfView),
  };
}

/**
 * A long run's saved answers (export._long_page_state): the kernel's own answer to a request with
 * the same parameters, or why the page cannot answer.
 */
export function savedAnswer(answers, request, state) {
  const same = (saved) => saved.type === request.type &&
    Object.entries(saved.request).every(([key, value]) => JSON.stringify(request[key]) === JSON.stringify(value));
  const found = (answers ?? []).find(same);
  if (found) return { content: { ...found.content, result_id: state.result_id }, buffers: [found.buffer] };
  const what = request.type === "attention_tile" ? "Zooming in or another layer" : "Another token, layer or direction";
  return { error: `This saved page holds layer ${state.layer}'s whole maps and the attention ${state.direction} token ${state.focus_token}. ${needsLiveWidget(what)}` };
}
