// Saved pages (widget.save_html, attnscope.render_html, html_action="return", the CLI,
// widget.slide): the widget's own render() over a static model that holds the widget's state,
// with no kernel, no widget manager and no network (export.page_state says what is saved).
// The model does in the kernel's place what a page can need: a layer switch serves the saved
// layer, a "neuron" request is answered from the stored queries and keys, and a change that needs
// the model says so.
import { createResponder } from "./channel.js";
import { halfToFloat } from "./codec.js";
import widget from "./widget.js";

function base64Bytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** The page's JSON with each binary part back at its path, as a DataView (what anywidget gives). */
export function withBuffers(json, buffers) {
  const value = structuredClone(json);
  for (const { path, data } of buffers) {
    let parent = value;
    for (const key of path.slice(0, -1)) parent = parent[key];
    parent[path.at(-1)] = new DataView(base64Bytes(data).buffer);
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
  if (slot < 0) return { error: `Layer ${layer + 1} is not in this saved page (it holds layers ${store.layers.map((l) => l + 1).join(", ")}).` };
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
      result_id: state.result_id, score_label: store.score_labels[String(layer)], shapes: [[d], [n, d], [n, d], [n], [n]] },
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
  const what = request.type === "attention_tile" ? "zooming in or another layer" : "another token, layer or direction";
  return { error: `This saved page holds layer ${state.layer + 1}'s whole maps and the attention ${state.direction} token ${state.focus_token}: ${what} needs a running notebook kernel.` };
}

/** A model with the anywidget interface over a saved page's state (export.page_state). */
export function createStaticModel(page) {
  const { state: saved, served, traits } = withBuffers(page.json, page.buffers);
  const state = { ...saved };
  const listeners = new Map();
  const emit = (name, ...args) => { for (const fn of listeners.get(name) ?? []) fn(...args); };
  const before = new Map(); // trait → its value before the changes not yet saved

  // What the kernel would do on a change the view makes, by the trait's page behaviour (contract.py).
  const onChange = {
    view: () => {},
    layer(name) {
      const payload = served.attention[String(state.layer)];
      if (payload) { state.attention = payload; emit("change:attention"); return; }
      state.error = `Layer ${state.layer + 1} is not in this saved page (it holds layers ${Object.keys(served.attention).map((l) => Number(l) + 1).join(", ")}).`;
      state[name] = before.get(name);
      emit("change:error");
    },
    edit() {
      state.error = "This is a saved page: editing the sentence needs a running notebook kernel.";
      state.result_id = state.request.id; // answered, as the kernel answers a failed edit
      emit("change:error");
      emit("change:result_id");
    },
    fixed(name) {
      state.error = `This saved page cannot change ${traits[name]?.label ?? name}: that needs a running notebook kernel.`;
      state[name] = before.get(name);
      emit("change:error");
    },
  };
  const respond = createResponder(
    {
      neuron: (request) => (served.neuron ? neuronAnswer(served.neuron, request, state) : { error: "This saved page holds no queries and keys." }),
      attention_rows: (request) => savedAnswer(served.answers, request, state),
      attention_tile: (request) => savedAnswer(served.answers, request, state),
      attention_window: (request) => savedAnswer(served.answers, request, state),
    },
    (content, buffers) => emit("msg:custom", content, buffers),
  );

  return {
    get: (name) => state[name],
    set(name, value) {
      if (!before.has(name)) before.set(name, state[name]);
      state[name] = value;
    },
    save_changes() {
      for (const name of [...before.keys()]) {
        onChange[traits[name]?.page ?? "fixed"](name);
        emit(`change:${name}`);
      }
      before.clear();
    },
    on(name, fn) { if (!listeners.has(name)) listeners.set(name, new Set()); listeners.get(name).add(fn); },
    off(name, fn) { listeners.get(name)?.delete(fn); },
    send: respond,
  };
}

export function mount(el, page) {
  return widget.render({ model: createStaticModel(page), el, page: true });
}
