// The kernel's picture of a widget output: the view it is open on, drawn from the saved page's
// state (export.page_state, the state a saved page opens) by that view's own scene function, as
// SVG text. It needs no DOM: the kernel runs it in QuickJS (picture.py), so that a notebook run by
// nbclient, shown on GitHub or reopened without its kernel still shows what the widget showed.
import "./picture_runtime.js";
import { decodeArray } from "./codec.js";
import { longNumbers, neuronNumbers } from "./requests.js";
import { neuronAnswer, savedAnswer, withBuffers } from "./saved.js";
import { sceneToSvg } from "./scene.js";
import { VIEWS } from "./views.js";

// Fewer and fewer lines (the head view's, each model view cell's) until the picture fits its bytes.
const THINNER = {
  head: [...[20000, 6000, 2000, 600].map((lineBudget) => ({ lineBudget })),
    ...[128, 64, 32].map((maxTokens) => ({ lineBudget: 600, maxTokens }))],
  model: [600, 80, 30, 12, 4].map((maxLines) => ({ maxLines })),
};

/** A saved answer as the views' request helpers give it: decoded numbers, {error}, or null. */
function answerOf(served, state, type, params, numbers) {
  const answer = type === "neuron" ? neuronAnswer(served.neuron, params, state) : savedAnswer(served.answers, { type, ...params }, state);
  return answer.error ? { error: answer.error } : numbers(answer.content, answer.buffers);
}

/**
 * The open view of a saved page as SVG: {svg, width, height, note} or {error} (why there is
 * none). page: {json, buffers} (export.page_data) as JSON text; maxBytes: the largest SVG kept
 * (a head view with many lines keeps its strongest, and says so in the picture).
 */
export function picture(pageText, { maxBytes = 95000, width = 900 } = {}) {
  const page = JSON.parse(pageText);
  const { state, served } = withBuffers(page.json, page.buffers);
  const get = (name) => state[name];
  const cache = new Map();
  const decoded = (name) => {
    if (cache.get(name)?.payload !== state[name]) cache.set(name, { payload: state[name], value: decodeArray(state[name]) });
    return cache.get(name).value;
  };
  const withoutRun = ({ result_id: _, ...params }) => params;
  const ask = (type) => (params) => answerOf(served, state, type, withoutRun(params), longNumbers);
  const context = {
    get, decoded, maskMode: false, width,
    neuronData: () => (served.neuron
      ? answerOf(served, state, "neuron", { layer: get("layer"), head: get("neuron_head"), query: get("neuron_query") }, neuronNumbers)
      : { error: "This output holds no queries and keys." }),
    long: { row: ask("attention_rows"), tile: ask("attention_tile"), window: ask("attention_window") },
  };
  const adapter = VIEWS.find((v) => v.name === state.view);
  if (!adapter) return { error: `no view named ${state.view}` };
  const dark = state.theme === "dark";
  const title = adapter.title(context);
  let svg = "";
  let scene = null;
  for (const thinner of THINNER[state.view] ?? [{}]) {
    scene = adapter.picture(context, { title, ...thinner });
    if (typeof scene === "string") return { error: scene };
    svg = sceneToSvg(scene, { dark });
    if (svg.length <= maxBytes) break;
  }
  if (svg.length > maxBytes) {
    return { error: `the ${adapter.label.toLowerCase()} view's picture would take ${Math.ceil(svg.length / 1000)} kB, over ${Math.floor(maxBytes / 1000)} kB` };
  }
  return { svg, width: scene.width, height: scene.height };
}
