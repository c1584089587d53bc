import { describe, expect, it } from "vitest";
import { decodeArray } from "./codec.js";
import { createLayerRequests, createLongRequests, createNeuronRequests, createWeighingRequests, LAYER_BYTES } from "./requests.js";

// One layer of `heads` × n × n, every byte `fill`, as the kernel sends it (payloads.layer_payload).
const payload = (layer, source, { n = 2, heads = 1, fill = layer } = {}) => ({
  layer, source, dtype: "uint8", shape: [heads, n, n], scale: 1 / 255, data: new DataView(new Uint8Array(heads * n * n).fill(fill).buffer),
});

// A page with traits and a channel whose requests the test answers by hand.
function page(traits) {
  const state = { ...traits };
  const asked = [];
  const channel = {
    request: (type, params) => new Promise((resolve, reject) => asked.push({ type, params, resolve, reject })),
  };
  const cache = new Map();
  const decoded = (name) => {
    if (cache.get(name)?.payload !== state[name]) cache.set(name, { payload: state[name], value: decodeArray(state[name]) });
    return cache.get(name).value;
  };
  let answers = 0;
  const layers = createLayerRequests(channel, (name) => state[name], decoded, () => { answers += 1; }, () => state.wanted === true);
  const answer = async (request, content) => {
    const { data, ...rest } = content;
    request.resolve({ content: rest, buffers: [data] });
    await new Promise((r) => setTimeout(r, 0));
  };
  return { state, asked, layers, answer, answers: () => answers };
}

describe("createLayerRequests", () => {
  it("holds the open layer and asks for the others two at a time, nearest first", async () => {
    const p = page({ attention: payload(2, "1:encoder:0:0"), layer: 2, n_layers: 5, long_context: false });
    expect(p.layers.data(2).bytes[0]).toBe(2);
    expect(p.layers.data(3)).toBeNull();
    p.layers.prefetch();
    p.layers.prefetch(); // two out at once: a second call while they are out asks nothing
    expect(p.asked.map((r) => [r.type, r.params.layer])).toEqual([["layer", 3], ["layer", 1]]);
    await p.answer(p.asked[1], payload(1, "1:encoder:0:0")); // answers may come in any order
    p.layers.prefetch();
    expect(p.asked.map((r) => r.params.layer)).toEqual([3, 1, 4]);
    await p.answer(p.asked[0], payload(3, "1:encoder:0:0"));
    await p.answer(p.asked[2], payload(4, "1:encoder:0:0"));
    p.layers.prefetch();
    await p.answer(p.asked[3], payload(0, "1:encoder:0:0"));
    expect(p.asked.map((r) => r.params.layer)).toEqual([3, 1, 4, 0]);
    expect(p.answers()).toBe(4);
    expect([0, 1, 3, 4].map((l) => p.layers.data(l).bytes[0])).toEqual([0, 1, 3, 4]);
    p.layers.prefetch();
    expect(p.asked).toHaveLength(4); // every layer held: nothing more to ask
  });

  it("asks for the next layer as soon as one comes while the page wants them, and stops when it does not", async () => {
    const p = page({ attention: payload(0, "a"), layer: 0, n_layers: 5, long_context: false, wanted: true });
    p.layers.prefetch();
    await p.answer(p.asked[0], payload(1, "a"));
    expect(p.asked.map((r) => r.params.layer)).toEqual([1, 2, 3]); // asked at the answer, no prefetch() call
    p.asked[1].reject(new Error("refused")); // a refusal moves on to the next layer too
    await new Promise((r) => setTimeout(r, 0));
    expect(p.asked.map((r) => r.params.layer)).toEqual([1, 2, 3, 4]);
    p.state.wanted = false; // another view opened: the answers are kept, nothing more is asked
    await p.answer(p.asked[2], payload(3, "a"));
    await p.answer(p.asked[3], payload(4, "a"));
    expect(p.asked).toHaveLength(4);
    expect(p.layers.data(3).bytes[0]).toBe(3);
    expect(p.layers.data(2)).toBeNull();
  });

  it("keeps its own copy when the trait brings a layer it holds, so the view need not draw it again", async () => {
    const p = page({ attention: payload(0, "a"), layer: 0, n_layers: 2, long_context: false });
    p.layers.prefetch();
    await p.answer(p.asked[0], payload(1, "a"));
    const held = p.layers.data(1);
    p.state.layer = 1;
    p.state.attention = payload(1, "a"); // the kernel's answer to the switch, after the page drew it
    expect(p.layers.data(1)).toBe(held);
  });

  it("drops the layers of an older run and never files an answer under another run", async () => {
    const p = page({ attention: payload(0, "run 1"), layer: 0, n_layers: 3, long_context: false });
    p.layers.prefetch();
    p.state.attention = payload(0, "run 2", { fill: 7 }); // an edit ran while the request was out
    await p.answer(p.asked[0], payload(1, "run 1"));
    expect(p.layers.data(1)).toBeNull();
    expect(p.layers.data(0).bytes[0]).toBe(7);
    p.layers.prefetch();
    await p.answer(p.asked[1], payload(1, "run 1")); // the kernel's answer names the old run
    expect(p.layers.data(1)).toBeNull();
  });

  it("does not ask again for a layer the kernel refused, nor for a long run's layers", async () => {
    const p = page({ attention: payload(0, "a"), layer: 0, n_layers: 2, long_context: false });
    p.layers.prefetch();
    p.asked[0].reject(new Error("closed"));
    await new Promise((r) => setTimeout(r, 0));
    p.layers.prefetch();
    expect(p.asked).toHaveLength(1);
    const long = page({ attention: payload(0, "a"), layer: 0, n_layers: 2, long_context: true });
    long.layers.prefetch();
    expect(long.asked).toHaveLength(0);
  });

  it("holds at most LAYER_BYTES", async () => {
    const n = 1024; // 4 heads × 1024² bytes: 4 MiB a layer
    const p = page({ attention: payload(0, "a", { n, heads: 4 }), layer: 0, n_layers: 40, long_context: false });
    let held = 1;
    for (;;) {
      p.layers.prefetch();
      if (p.asked.length < held) break;
      await p.answer(p.asked.at(-1), payload(p.asked.at(-1).params.layer, "a", { n, heads: 4 }));
      held += 1;
    }
    expect(held * 4 * n * n).toBeLessThanOrEqual(LAYER_BYTES);
    expect((held + 1) * 4 * n * n).toBeGreaterThan(LAYER_BYTES);
  });
});

describe("createLongRequests().refined", () => {
  // A channel whose "attention_tile" requests the test answers by hand.
  function kernel() {
    const asked = [];
    const channel = { request: (type, params) => new Promise((resolve, reject) => asked.push({ type, params, resolve, reject })) };
    let redraws = 0;
    const long = createLongRequests(channel, () => { redraws += 1; });
    const answer = async (request, content, values) => {
      request.resolve({ content: { ...request.params, result_id: 1, n_tokens: 4, shape: [2, 2], dtype: "float32", exact: false, ...content },
        buffers: [new DataView(Float32Array.from(values).buffer)] });
      await new Promise((r) => setTimeout(r, 0));
    };
    return { asked, long, answer, redraws: () => redraws };
  }
  const params = (reduce) => ({ result_id: 1, layer: 0, head: -1, rows: [0, 4], cols: [0, 4], bins: 2, reduce });

  it("shows the first pass at once and merges the next ones, asked one at a time (max)", async () => {
    const k = kernel();
    expect(k.long.refined(params("max"))).toBeNull();
    expect(k.long.refined(params("max"))).toBeNull(); // one request out: no second
    expect(k.asked.map((a) => a.params.pass)).toEqual([0]);
    await k.answer(k.asked[0], { pass: 0, passes: 2 }, [0.1, 0.5, 0.2, 0]);
    let tile = k.long.refined(params("max"));
    expect([tile.passesDone, tile.passes, tile.exact]).toEqual([1, 2, false]);
    expect(Array.from(tile.values)).toEqual(Array.from(Float32Array.from([0.1, 0.5, 0.2, 0])));
    expect(k.asked.map((a) => a.params.pass)).toEqual([0, 1]); // the next pass, asked as the first is drawn
    await k.answer(k.asked[1], { pass: 1, passes: 2 }, [0.3, 0.4, 0.1, 0.6]);
    tile = k.long.refined(params("max"));
    expect(tile.passesDone).toBe(2);
    expect(Array.from(tile.values)).toEqual(Array.from(Float32Array.from([0.3, 0.5, 0.2, 0.6])));
    expect(k.asked).toHaveLength(2); // done: nothing more asked
    expect(k.redraws()).toBe(2);
  });

  it("adds a mean's passes, and stands the sum so far for their share until all are in", async () => {
    const k = kernel();
    k.long.refined(params("mean"));
    await k.answer(k.asked[0], { pass: 0, passes: 4 }, [0.1, 0.2, 0, 0.05]);
    expect(Array.from(k.long.refined(params("mean")).values)).toEqual(Array.from(Float32Array.from([0.4, 0.8, 0, 0.2])));
    for (const pass of [1, 2, 3]) {
      k.long.refined(params("mean")); // the redraw after an answer asks for the next pass
      await k.answer(k.asked[pass], { pass, passes: 4 }, [0.1, 0.2, 0, 0.05]);
    }
    const tile = k.long.refined(params("mean"));
    expect(tile.passesDone).toBe(4);
    expect(Array.from(tile.values)).toEqual(Array.from(Float32Array.from([0.4, 0.8, 0, 0.2])));
  });

  it("takes an answer without passes (a saved page's whole map) as done, and says an error", async () => {
    const k = kernel();
    k.long.refined(params("max"));
    await k.answer(k.asked[0], {}, [1, 0, 0, 1]);
    expect(k.long.refined(params("max")).passesDone).toBe(1);
    expect(k.asked).toHaveLength(1);
    const other = { ...params("max"), layer: 1 };
    k.long.refined(other);
    k.asked[1].reject(new Error("This saved page holds layer 0's whole maps"));
    await new Promise((r) => setTimeout(r, 0));
    expect(k.long.refined(other).error).toContain("saved page");
    expect(k.asked).toHaveLength(2);
  });
});

describe("createNeuronRequests", () => {
  // One layer's store as the kernel answers it (export.neuron_store: float16 buffers at `paths`),
  // for model `shown`: 2 heads, 3 queries, 3 keys, d = 1; query q of head h is value + 0.25·(3h + q).
  const f16 = (x) => { // float16 bits of small exact values (multiples of 0.25 up to 4)
    const e = Math.floor(Math.log2(x));
    return ((e + 15) << 10) | Math.round((x / 2 ** e - 1) * 1024);
  };
  const half = (values) => new DataView(new Uint16Array(values.map(f16)).buffer);
  const numbers = (shown, value) => ({
    content: { layer: 1, n_queries: 3, part: "", shown, result_id: 4,
      store: { layers: [1], key_group: 1, causal: false, scaling: [1, 1], score_labels: { 1: "q·k" }, n_queries: 3, part: "",
        queries: { data: null, dtype: "float16", shape: [1, 2, 3, 1] }, keys: { data: null, dtype: "float16", shape: [1, 2, 3, 1] } },
      paths: [["queries", "data"], ["keys", "data"]] },
    buffers: [half([0, 1, 2, 3, 4, 5].map((i) => value + 0.25 * i)), half([1, 1, 1, 1, 1, 1])],
  });

  it("files each compared model's numbers apart: switching models asks again", async () => {
    const state = { result_id: 4, layer: 1, neuron_head: 0, neuron_query: 2, tokens: ["a", "b", "c"], parts: [],
      compared_model: "tuned", compare_shown: "first" };
    const asked = [];
    const channel = { request: (type, params) => new Promise((resolve) => asked.push({ type, params, resolve })) };
    const neuron = createNeuronRequests(channel, (name) => state[name], () => {});
    expect(neuron.data()).toBeNull();
    expect(asked[0]).toMatchObject({ type: "neuron", params: { layer: 1 } });
    asked[0].resolve(numbers("first", 1));
    await new Promise((r) => setTimeout(r, 0));
    expect(neuron.data().query[0]).toBe(1.5);
    state.compare_shown = "second";
    expect(neuron.data()).toBeNull(); // not the first model's numbers
    expect(asked).toHaveLength(2);
    asked[1].resolve(numbers("second", 2));
    await new Promise((r) => setTimeout(r, 0));
    expect(neuron.data().query[0]).toBe(2.5);
    state.compare_shown = "first";
    expect(neuron.data().query[0]).toBe(1.5);
  });

  it("draws another query or head of the layer it holds with no request; another layer asks", async () => {
    const state = { result_id: 4, layer: 1, neuron_head: 0, neuron_query: 0, tokens: ["a", "b", "c"], parts: [] };
    const asked = [];
    const channel = { request: (type, params) => new Promise((resolve) => asked.push({ type, params, resolve })) };
    const neuron = createNeuronRequests(channel, (name) => state[name], () => {});
    expect(neuron.data()).toBeNull();
    asked[0].resolve(numbers("", 1));
    await new Promise((r) => setTimeout(r, 0));
    for (const [head, query] of [[0, 0], [0, 2], [1, 1], [1, 2]]) {
      Object.assign(state, { neuron_head: head, neuron_query: query });
      expect(neuron.data().query[0]).toBe(1 + 0.25 * (3 * head + query));
      expect(neuron.data().softmax).toHaveLength(3);
    }
    expect(asked).toHaveLength(1);
    state.neuron_query = 7;
    expect(neuron.data().error).toMatch(/query_index=7 is out of range/);
    state.layer = 2;
    expect(neuron.data()).toBeNull();
    expect(asked).toHaveLength(2);
    expect(asked[1].params).toEqual({ layer: 2 });
  });
});

describe("createLongRequests().tokenRows", () => {
  it("asks the kernel for a token's rows once, files them by run, weighing, token and selection, and asks again for another", async () => {
    const asked = [];
    const channel = { request: (type, params) => new Promise((resolve) => asked.push({ type, params, resolve })) };
    const long = createLongRequests(channel, () => {});
    const params = { result_id: 2, weigh_by: "attention", token: 5, layers: null, heads: null };
    expect(long.tokenRows(params)).toBeNull();
    expect(long.tokenRows(params)).toBeNull(); // asked once
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ type: "token_rows", params: { token: 5, layers: null, heads: null } });
    asked[0].resolve({ content: { token: 5, layers: [0], heads: [0, 1], n_tokens: 6, shape: [1, 2, 1, 6], dtype: "float32", result_id: 2,
      weigh_by: "attention" }, buffers: [new DataView(new Float32Array(12).fill(0.5).buffer)] });
    await new Promise((r) => setTimeout(r, 0));
    const rows = long.tokenRows(params);
    expect(rows.heads).toEqual([0, 1]);
    expect(rows.values).toHaveLength(12);
    expect(long.tokenRows({ ...params, heads: [1] })).toBeNull(); // another selection: asked again
    expect(long.tokenRows({ ...params, weigh_by: "value_norm" })).toBeNull();
    expect(asked).toHaveLength(3);
  });
});

it("keeps a few tokens' rows, apart from the other answers", async () => {
  const asked = [];
  const channel = { request: (type, params) => new Promise((resolve) => asked.push({ type, params, resolve })) };
  const long = createLongRequests(channel, () => {});
  const params = (token) => ({ result_id: 1, weigh_by: "attention", token, layers: null, heads: null });
  for (let token = 0; token < 9; token++) {
    long.tokenRows(params(token));
    asked.at(-1).resolve({ content: { token, layers: [0], heads: [0], n_tokens: 9, shape: [1, 1, 1, 9], dtype: "float32", result_id: 1,
      weigh_by: "attention" }, buffers: [new DataView(new Float32Array(9).buffer)] });
    await new Promise((r) => setTimeout(r, 0));
  }
  expect(long.tokenRows(params(8))).not.toBeNull();
  expect(long.tokenRows(params(1))).not.toBeNull(); // 8 kept
  expect(long.tokenRows(params(0))).toBeNull(); // the oldest went: asked again
  expect(asked).toHaveLength(10);
});

describe("createWeighingRequests", () => {
  // The page's traits, its layer requests and its Weigh by requests, seen through the overlay as the
  // head view sees them (widget.js: shownGet).
  function weighingPage(traits) {
    const p = page(traits);
    let answered = 0;
    const weighing = createWeighingRequests({ request: (type, params) => new Promise((resolve, reject) => p.asked.push({ type, params, resolve, reject })) },
      (name) => p.state[name], () => { answered += 1; });
    const shown = (name) => ((name === "attention" || name === "one_scale") && weighing.pending() ? weighing.pending()[name] : p.state[name]);
    return { ...p, weighing, shown, answered: () => answered };
  }
  const scale = { of: "‖αf‖", measure: "‖αf‖", largest: 4.2, layer: 1, head: 0 };
  const weighedAnswer = (layer, of) => ({ ...payload(layer, `${of}:vn`, { fill: 200 }), weigh_by: "value_norm", one_scale: scale, of });

  it("asks once for the open layer under the other weighing, and stands in for the traits only once the page switched", async () => {
    const p = weighingPage({ attention: payload(2, "a"), layer: 2, n_layers: 4, weigh_by: "attention", one_scale: {}, long_context: false });
    p.weighing.prefetch();
    p.weighing.prefetch(); // asked already for this run and layer
    expect(p.asked.map((r) => r.params)).toEqual([{ layer: 2, weigh_by: "value_norm" }]);
    await p.answer(p.asked[0], weighedAnswer(2, "a"));
    expect(p.answered()).toBe(1);
    expect(p.weighing.pending()).toBeNull(); // the page still shows α: the traits as they are
    p.state.weigh_by = "value_norm"; // the reader's switch, before the kernel answers it
    expect(p.shown("attention").source).toBe("a:vn");
    expect(new Uint8Array(p.shown("attention").data.buffer)[0]).toBe(200);
    expect(p.shown("one_scale")).toEqual(scale);
    p.state.layer = 1; // another layer: the held one is not it
    expect(p.weighing.pending()).toBeNull();
    p.state.layer = 2;
    const alphaPayload = p.state.attention;
    p.weighing.pending(); // drawn weighed: what the page showed before is kept as the way back
    p.state.attention = payload(2, "a:vn", { fill: 200 }); // the kernel's answer to the switch
    p.state.one_scale = scale;
    expect(p.weighing.pending()).toBeNull();
    p.weighing.prefetch(); // the way back is what the page showed before: nothing asked
    expect(p.asked).toHaveLength(1);
    p.state.weigh_by = "attention"; // back at once, before any answer
    expect(p.shown("attention")).toBe(alphaPayload);
    expect(p.shown("one_scale")).toEqual({});
    p.state.attention = payload(2, "a"); // the kernel's answer: the first run's source again
    p.state.one_scale = {};
    p.state.weigh_by = "value_norm"; // and over again, still nothing asked
    expect(p.shown("attention").source).toBe("a:vn");
    expect(p.shown("one_scale")).toEqual(scale);
    expect(p.asked).toHaveLength(1);
  });

  it("asks for the model view's cells too while it is open, and stands in for them only for that selection", async () => {
    const p = weighingPage({ attention: payload(1, "a"), layer: 1, n_layers: 3, weigh_by: "attention", include_layers: null, include_heads: null });
    p.weighing.prefetch("attention");
    await p.answer(p.asked[0], weighedAnswer(1, "a"));
    p.state.weigh_by = "value_norm";
    expect(p.weighing.pending("attention")).not.toBeNull();
    expect(p.weighing.pending("thumbnails")).toBeNull(); // asked without the cells: the model view waits for the kernel
    p.state.weigh_by = "attention";
    p.weighing.prefetch("thumbnails"); // the model view opened: asked again, with its cells
    expect(p.asked.at(-1).params).toEqual({ layer: 1, weigh_by: "value_norm", thumbnails: true });
    const cells = { layers: [0, 1, 2], heads: [0], n_tokens: 2, dtype: "uint8", shape: [3, 1, 2, 2], scale: 1 / 255 };
    const { data, ...content } = weighedAnswer(1, "a");
    p.asked.at(-1).resolve({ content: { ...content, thumbnails: cells }, buffers: [data, new DataView(new Uint8Array(12).fill(7).buffer)] });
    await new Promise((r) => setTimeout(r, 0));
    p.weighing.prefetch("attention"); // held with the cells: the head view asks nothing more
    expect(p.asked).toHaveLength(2);
    p.state.weigh_by = "value_norm";
    const held = p.weighing.pending("thumbnails");
    expect(held.thumbnails.shape).toEqual([3, 1, 2, 2]);
    expect(new Uint8Array(held.thumbnails.data.buffer)[0]).toBe(7);
    expect(held.one_scale).toEqual(scale);
    p.state.include_heads = [0]; // another selection: its cells are not these
    expect(p.weighing.pending("thumbnails")).toBeNull();
    expect(p.weighing.pending("attention")).not.toBeNull();
  });

  it("never stands in for another run, and a refusal or a long run asks nothing more", async () => {
    const p = weighingPage({ attention: payload(0, "a"), layer: 0, n_layers: 2, weigh_by: "attention", long_context: false });
    p.weighing.prefetch();
    await p.answer(p.asked[0], weighedAnswer(0, "a"));
    p.state.attention = payload(0, "b"); // an edit came: another run
    p.state.weigh_by = "value_norm";
    expect(p.weighing.pending()).toBeNull();
    p.state.weigh_by = "attention";
    p.weighing.prefetch();
    p.asked[1].reject(new Error("this model keeps no value norms"));
    await new Promise((r) => setTimeout(r, 0));
    p.weighing.prefetch();
    expect(p.asked).toHaveLength(2);
    for (const traits of [{ long_context: true }, { weigh_unavailable: "gated" }]) {
      const q = weighingPage({ attention: payload(0, "c"), layer: 0, n_layers: 2, weigh_by: "attention", ...traits });
      q.weighing.prefetch();
      expect(q.asked).toHaveLength(0);
    }
  });
});
