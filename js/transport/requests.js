// What the views ask the kernel (or a saved page's static model) for, over the channel, one
// cached helper for every kind: the neuron view's numbers, the long text view's rows and the map
// view's tiles. An answer is filed under what the kernel says it answers (run, layer, ...), so an
// answer for an older run or selection is never shown as current.
import { decodeArray } from "./codec.js";
import { neuronMaths } from "../drawing/neuron_maths.js";
import { neuronAnswer, withBuffers } from "./saved.js";

/**
 * A cache of answers by key: ask(key, type, params, file) returns the answer filed under key,
 * null while it is asked for (onAnswer() is called when it comes), or {error}. file(content,
 * buffers) → [answeredKey, value]: where the answer goes.
 */
export function createRequestCache(channel, onAnswer, { limit = 64 } = {}) {
  const cache = new Map();
  const pending = new Set();
  function keep(key, value) {
    cache.delete(key);
    cache.set(key, value);
    while (cache.size > limit) cache.delete(cache.keys().next().value); // the oldest answer goes first
  }
  return {
    ask(key, type, params, file) {
      if (cache.has(key)) return cache.get(key);
      if (pending.has(key)) return null;
      pending.add(key);
      channel.request(type, params).then(({ content, buffers }) => {
        const [answered, value] = file(content, buffers);
        keep(answered, value);
      }).catch((err) => {
        keep(key, { error: err.message });
      }).finally(() => {
        pending.delete(key);
        onAnswer();
      });
      return null;
    },
  };
}

/**
 * A "neuron" answer (the kernel's, or a saved page's: the same bytes) as the view's numbers: its
 * float16 inputs, named in msg.inputs, decoded, and what neuron_maths.js computes from them.
 */
export function neuronNumbers(msg, buffers) {
  const inputs = Object.fromEntries((msg.inputs ?? []).map((name, i) =>
    [name, decodeArray({ data: buffers[i], dtype: "float16", shape: msg.shapes[i] }).values]));
  const { query, keys, values = null, norms = null, bias = null } = inputs;
  const results = neuronMaths({ query, keys, values, norms, bias, d: msg.d, queryIndex: msg.query, scaling: msg.scaling,
    causal: msg.causal, sink: msg.sink });
  return { query, keys, values, norms, ...results, d: msg.d, scoreLabel: msg.score_label };
}

/** A long request's answer (rows, a tile, a window): its content with the float32 values decoded. */
export const longNumbers = (msg, buffers) => ({ ...msg, values: decodeArray({ data: buffers[0], dtype: msg.dtype, shape: msg.shape }).values });

/**
 * The neuron view's source: data() returns the numbers for the open layer, head and query, or
 * null while they are asked for, or {error}. The kernel answers a layer at a time with what a saved
 * page stores (export.neuron_store): another query or head of that layer is computed here, with
 * no round trip, cut from the store as a saved page cuts it (saved.js neuronAnswer).
 * @param {{request: (type: string, params?: object) => Promise<{content: any, buffers: DataView[]}>}} channel
 * @param {(name: string) => any} get  a synced trait
 * @param {() => void} onAnswer
 */
export function createNeuronRequests(channel, get, onAnswer) {
  const requests = createRequestCache(channel, onAnswer, { limit: 8 });
  const part = () => ((get("parts") ?? []).length > 1 ? get("attention_part") : "");
  // Comparing two models: which one's numbers (the same run, layer and query differ by model).
  const shown = () => (get("compared_model") ? get("compare_shown") : "");
  let last = { key: "", numbers: null }; // the numbers drawn last: a redraw does not compute them again
  return {
    data() {
      const layer = get("layer");
      const layerKey = [get("result_id"), layer, get("tokens").length, part(), shown()].join(":");
      const store = requests.ask(layerKey, "neuron", { layer }, (msg, buffers) => [
        [msg.result_id, msg.layer, msg.n_queries, msg.part ?? "", msg.shown ?? ""].join(":"), neuronStore(msg, buffers)]);
      if (!store || store.error) return store;
      const request = { layer, head: get("neuron_head"), query: get("neuron_query") };
      const key = `${layerKey}:${request.head}:${request.query}`;
      if (last.key !== key) {
        const answer = neuronAnswer(store, request, { result_id: get("result_id") });
        last = { key, numbers: "error" in answer ? answer : neuronNumbers(answer.content, answer.buffers) };
      }
      return last.numbers;
    },
  };
}

/** A "neuron" answer's store with its buffers back at their paths (a saved page's holds them already). */
export const neuronStore = (msg, buffers) => withBuffers(msg.store, msg.paths.map((path, i) => ({ path, data: buffers[i] })),
  (view) => new Uint8Array(view.buffer, view.byteOffset, view.byteLength).slice(), { copy: false });

// Filed by run and weighing: switching Weigh by keeps the run, and its numbers change.
const rowKey = (p) => ["row", p.result_id, p.weigh_by, p.layer, p.head, p.token, p.direction].join(":");
const windowKey = (p) => ["window", p.result_id, p.weigh_by, p.layer, p.token].join(":");
// The model view's selection (include_layers, include_heads: null for all) is the kernel's own; it is
// in the key so that another selection asks again.
const tokenRowsKey = (p) => ["tokenRows", p.result_id, p.weigh_by, p.token, JSON.stringify(p.layers ?? null), JSON.stringify(p.heads ?? null)].join(":");
const tileKey = (p) => ["tile", p.result_id, p.weigh_by, p.layer, p.head, ...p.rows, ...p.cols, p.bins, p.reduce].join(":");

/**
 * The long views' source: row(params), tile(params) and window(params) return {values, ...} for
 * exact rows, pooled tiles and the head view's window, null while asked for, or {error}; params
 * as in messages.py ("attention_rows", "attention_tile", "attention_window"), with the run's result_id.
 */
export function createLongRequests(channel, onAnswer) {
  const requests = createRequestCache(channel, onAnswer, { limit: 96 });
  // A token's rows in every layer × head are large (30 layers × 9 heads × 8,192 tokens: 8.8 MB):
  // a few are kept, apart, so that stepping through a generation's output does not hold hundreds.
  const tokenRowCache = createRequestCache(channel, onAnswer, { limit: 8 });
  // The run's id and weighing are in the key, not in the request: the kernel answers with the run it has.
  const ask = (key, type) => (params) => {
    const { result_id: run, weigh_by: weighing, ...sent } = params;
    return requests.ask(key({ result_id: run, weigh_by: weighing, ...sent }), type, sent,
      (msg, buffers) => [key(msg), longNumbers(msg, buffers)]);
  };
  const refining = new Map(); // key → an answer refined in passes (refinedAnswer)
  let latest = ""; // the one the view last drew: only it refines on its own
  function refined(key, make) {
    latest = key;
    if (!refining.has(key)) {
      refining.set(key, make(() => latest === key));
      while (refining.size > 16) refining.delete(refining.keys().next().value);
    }
    return refining.get(key).current();
  }
  return {
    row: ask(rowKey, "attention_rows"),
    tile: ask(tileKey, "attention_tile"),
    window: ask(windowKey, "attention_window"),
    /**
     * The model view's cells for the selected token ("token_rows"): params {result_id, weigh_by,
     * token, layers, heads} (the included ones, null for all) → {values [layers, heads, 1, T],
     * layers, heads, token, ...}, null while asked for, or {error}. Filed under what was asked when
     * the answer is for that run, weighing and token (the kernel answers with its own selection).
     */
    tokenRows(params) {
      const key = tokenRowsKey(params);
      const { result_id: run, weigh_by: weighing, ...sent } = params;
      return tokenRowCache.ask(key, "token_rows", sent, (msg, buffers) => [
        msg.result_id === run && msg.weigh_by === weighing && msg.token === params.token ? key : tokenRowsKey(msg),
        longNumbers(msg, buffers)]);
    },
    /**
     * A large tile (the map's overview) in passes: the first pass's answer at once, then the next
     * pass asked for once this one came (one at a time, so the kernel answers a click in between).
     * → {values, ..., passesDone, passes} (exact once passesDone === passes), null, or {error}.
     */
    refined(params) {
      const key = tileKey(params);
      const sent = { ...params };
      delete sent.result_id; // the kernel answers with the run it has, weighed as it has it
      delete sent.weigh_by;
      return refined(key, (shown) => refinedAnswer(channel, "attention_tile", sent, (msg) => tileKey(msg) === key, onAnswer, shown));
    },
    /**
     * A long run's model view thumbnails in passes ("thumbnails"), for those the kernel does not
     * make at once: `what` names the run and selection they are for (result_id, layers, heads).
     * → {values, shape, layers, heads, n_tokens, passesDone, passes}, null, or {error}.
     */
    thumbnails(what) {
      const same = (got, wanted) => wanted === null || wanted === undefined || String(got) === String(wanted);
      const answersFor = (msg) => msg.result_id === what.result_id && msg.weigh_by === what.weigh_by
        && same(msg.layers, what.layers) && same(msg.heads, what.heads);
      return refined(["thumbnails", what.result_id, what.weigh_by, what.layers, what.heads].join(":"),
        (shown) => refinedAnswer(channel, "thumbnails", {}, answersFor, onAnswer, shown));
    },
  };
}

/** One answer refined in passes (createLongRequests' refined and thumbnails): passes merged as they
 * come (a mean's added, else the elementwise max), the next asked for as soon as one comes while
 * it is the one shown (`shown()`), so the kernel refines it while the page draws; another shown
 * pauses it until it is drawn again. `answers(msg)`: the answer is for this (not an older run).
 * current() gives the same object until another pass comes: a view draws again only then. */
function refinedAnswer(channel, type, sent, answers, onAnswer, shown) {
  let merged = null; // {content, values}: the passes so far, max-merged or summed
  let done = 0;
  let passes = null;
  let asking = false;
  let error = null;
  let current = null; // what current() gives for the passes in
  function askNext() {
    asking = true;
    channel.request(type, { ...sent, pass: done }).then(({ content, buffers }) => {
      if (!answers(content)) return; // another run's
      const { values } = longNumbers(content, buffers);
      passes = content.passes ?? 1; // a saved page's answer is the whole map at once
      if (!merged) merged = { content, values: Float32Array.from(values) };
      else if (content.reduce === "mean") for (let i = 0; i < values.length; i++) merged.values[i] += values[i];
      else for (let i = 0; i < values.length; i++) merged.values[i] = Math.max(merged.values[i], values[i]);
      done += 1;
      // A mean's passes add up: until all are in, the sum so far stands for its share of them.
      const shownValues = merged.content.reduce === "mean" && done < passes
        ? merged.values.map((v) => (v * passes) / done) : merged.values.slice();
      current = { ...merged.content, values: shownValues, exact: Boolean(merged.content.exact) && done === passes,
        passesDone: done, passes };
    }).catch((err) => {
      error = err.message;
    }).finally(() => {
      asking = false;
      if (!error && done < passes && shown()) askNext();
      onAnswer();
    });
  }
  return {
    current() {
      if (error && !merged) return { error };
      if (!asking && !error && (passes === null || done < passes)) askNext();
      return current;
    },
  };
}

// Whole layers a page holds besides the open one, at most this many bytes (12 layers of 512
// tokens × 12 heads, one byte a weight, fit; a long text's layers are not asked for).
export const LAYER_BYTES = 48 * 2 ** 20;
// Layer requests out at once: each one's time is mostly the trip through the Jupyter server,
// which two overlap (one at a time, a 405-token MiniLM's five other layers took ~0.9 s to come).
const LAYERS_IN_FLIGHT = 2;
// What a layer takes once held: one byte a weight (however few bytes it crossed as).
const heldBytes = (payload) => payload.shape.reduce((a, b) => a * b, 1);

/**
 * The head view's layers. The open one comes in the `attention` trait; the ones around it are
 * asked for ("layer" requests, two at a time) while the page is idle, so a layer switch draws at
 * once instead of after a round trip through the kernel. Each is filed under the run it was made
 * from (the payload's `source`): a new run or another way of showing it drops the others.
 * data(layer) → the decoded layer, or null while the page does not hold it; prefetch() asks for
 * the next layers not held (nearest the open one first, LAYERS_IN_FLIGHT at a time) and calls
 * onAnswer as each comes. While `wanted()` (a view that draws these layers is open), each answer
 * asks for the next at once: a user's first layer switch comes about 300 ms after the first
 * paint, and a pause between requests left the layers they go to unfetched (issue 45 item 7).
 * @param {{request: (type: string, params?: object) => Promise<{content: any, buffers: DataView[]}>}} channel
 * @param {(name: string) => any} get  a synced trait
 * @param {(name: string) => any} decoded  a binary trait, decoded once per payload
 */
export function createLayerRequests(channel, get, decoded, onAnswer = () => {}, wanted = () => false) {
  const held = new Map(); // layer → decoded attention, of `source`
  const refused = new Set(); // layers the kernel did not give for `source`: not asked again
  let source;
  const asking = new Set(); // layers asked for, not answered yet
  let bytes = 0;
  function open() {
    const payload = get("attention");
    if (!payload?.data) return null;
    if (payload.source !== source) {
      held.clear();
      refused.clear();
      bytes = 0;
      source = payload.source;
    }
    // The trait's copy of a layer already held is the same numbers: the held one is kept, so the
    // view sees the same object and does not draw it again.
    if (!held.has(payload.layer)) {
      held.set(payload.layer, decoded("attention"));
      bytes += heldBytes(payload);
    }
    return payload;
  }
  const requests = {
    data(layer) {
      return open() ? held.get(layer) ?? null : null;
    },
    prefetch() {
      const payload = open();
      if (!payload || get("long_context")) return;
      const n = get("n_layers");
      const at = get("layer");
      const order = [];
      for (let d = 1; d < n; d++) order.push(at + d, at - d);
      const wanting = order.filter((l) => l >= 0 && l < n && !held.has(l) && !refused.has(l) && !asking.has(l));
      for (const next of wanting) {
        if (asking.size >= LAYERS_IN_FLIGHT || bytes + (asking.size + 1) * heldBytes(payload) > LAYER_BYTES) return;
        ask(next);
      }
    },
  };
  function ask(next) {
    asking.add(next);
    const askedFor = source;
    channel.request("layer", { layer: next }).then(({ content, buffers }) => {
      // An answer for another run (the kernel moved on meanwhile) is not this run's layer.
      if (content.source !== askedFor || source !== askedFor || held.has(content.layer)) return;
      held.set(content.layer, decodeArray({ ...content, data: buffers[0] }));
      bytes += heldBytes(content);
    }).catch(() => {
      // Not held: that layer still comes in the trait when opened, after a round trip.
      if (source === askedFor) refused.add(next);
    }).finally(() => {
      asking.delete(next);
      onAnswer();
      if (wanted()) requests.prefetch();
    });
  }
  return requests;
}

/**
 * The open layer under the other weighing (Weigh by: α | ‖αf‖), asked for while the page is idle,
 * so a switch draws at once instead of after the kernel weighs the run again (layer_answers.py);
 * with the model view's cells too while that view is open (`thumbnails`). The answer names the
 * source of the run shown when it was asked (`of`): it stands in for the `attention`, `one_scale`
 * and `thumbnails` traits only while that run is still the one shown, at that layer and (for the
 * cells) with those layers and heads included, and the page's weigh_by is the answer's (the kernel
 * has not answered the switch yet). The kernel's own layer then comes under the same source: the
 * layer requests keep the held one.
 * pending(draws) → what a view that draws `draws` ("attention" or "thumbnails") reads instead of
 * the traits, {attention, one_scale[, thumbnails]}, or null; prefetch(draws) asks once for the
 * shown run, layer and selection, and calls onAnswer when it comes.
 * @param {{request: (type: string, params?: object) => Promise<{content: any, buffers: DataView[]}>}} channel
 * @param {(name: string) => any} get  a synced trait
 */
export function createWeighingRequests(channel, get, onAnswer = () => {}) {
  let held = null; // {of, layer, weigh_by, selection, attention, one_scale, thumbnails?, decoded: Map(payload → value), before?}
  let asked = ""; // what was last asked for (answered or refused: not asked again)
  const other = () => (get("weigh_by") === "attention" ? "value_norm" : "attention");
  const selection = () => JSON.stringify([get("include_layers") ?? null, get("include_heads") ?? null]);
  // Once the kernel shows the weighing the page switched to, the way back is what the page showed
  // before: the same run and layer weighed the other way. Nothing is asked (a reader going back
  // and forth at once found the answer not there yet).
  function turned() {
    const payload = get("attention");
    if (!held?.before || !payload || held.attention.source !== payload.source || held.layer !== payload.layer) return;
    const { before } = held;
    held = { of: payload.source, layer: held.layer, weigh_by: held.before.weigh_by, selection: held.selection, attention: before.attention,
      one_scale: before.one_scale, ...(before.thumbnails ? { thumbnails: before.thumbnails } : {}), decoded: new Map() };
    asked = `${payload.source}:${payload.layer}:${before.thumbnails ? held.selection : ""}`;
  }
  return {
    pending(draws = "attention") {
      turned();
      const payload = get("attention");
      if (!held || !payload || held.of !== payload.source || held.layer !== get("layer") || held.weigh_by !== get("weigh_by")) return null;
      // What the page showed before the switch is the way back, once the kernel has answered it.
      if (!held.before && payload.layer === held.layer) {
        const cells = get("thumbnails");
        const sameCells = cells?.data && held.selection === selection();
        held.before = { attention: payload, weigh_by: other(), one_scale: get("one_scale") ?? {}, ...(sameCells ? { thumbnails: cells } : {}) };
      }
      if (draws === "thumbnails" && (!held.thumbnails || held.selection !== selection())) return null;
      return draws === "attention" || draws === "thumbnails" ? held : null;
    },
    /** The answer for the run and layer shown now, whichever weighing the page shows (its layer's
     * lines are worked out ahead, as the held layers' are), or null. */
    ahead() {
      turned();
      const payload = get("attention");
      return held && payload && held.of === payload.source && held.layer === get("layer") ? held : null;
    },
    /** A payload of the answer held, decoded once (the same object each time: its lines are kept
     * by it), or undefined for any other payload. */
    decoded(payload) {
      if (!held || (payload !== held.attention && payload !== held.thumbnails)) return undefined;
      if (!held.decoded.has(payload)) held.decoded.set(payload, decodeArray(payload));
      return held.decoded.get(payload);
    },
    prefetch(draws = "attention") {
      const payload = get("attention");
      if (!payload?.source || get("long_context") || get("weigh_unavailable") || payload.layer !== get("layer")) return;
      turned();
      const thumbnails = draws === "thumbnails";
      const key = `${payload.source}:${payload.layer}:${thumbnails ? selection() : ""}`;
      // Held with the cells already: the head view needs nothing more.
      if (asked === key || (!thumbnails && asked.startsWith(`${payload.source}:${payload.layer}:`))) return;
      asked = key;
      const askedSelection = selection();
      channel.request("layer", { layer: payload.layer, weigh_by: other(), ...(thumbnails ? { thumbnails: true } : {}) }).then(({ content, buffers }) => {
        const { one_scale: scale, of, weigh_by: weighBy, thumbnails: cells, ...attention } = content;
        held = { of, layer: content.layer, weigh_by: weighBy, selection: askedSelection, attention: { ...attention, data: buffers[0] },
          one_scale: scale ?? {}, ...(cells ? { thumbnails: { ...cells, data: buffers[1] } } : {}), decoded: new Map() };
        onAnswer();
      }).catch(() => {
        // Not held: the switch draws after the kernel's round trip, as before.
      });
    },
  };
}
