// The table of views the widget shows, one adapter each: how to create the view in its body,
// what of the synced state it draws (decoded once, checked against the tokens) and the title of
// its image. A view is declared in src/attnscope/views.py (name, label, modes) and given its
// adapter here; render() in widget.js loops.
import { createHeadMapView, heatmapImage } from "./head_map_view.js";
import { createHeadScatterView, scatterScene } from "./head_scatter_view.js";
import { createMatrixView, matrixImage } from "./matrix_view.js";
import { VIEWS as DECLARED_VIEWS } from "./contract.js";
import { PARTS } from "./controls.js";
import { el, tokenCaption } from "./dom.js";
import { headName } from "./labels.js";
import { CAUSAL_NOTE, createHeadView, headScene } from "./head_view.js";
import { createMapView, mapScene, mapSize, tileRequest, wholeMap } from "./map_view.js";
import { createModelView, modelImage } from "./model_view.js";
import { createNeuronView, neuronScene } from "./neuron_view.js";
import { createTextView, textScene } from "./text_view.js";

/**
 * What an adapter reads the state through.
 * @typedef {object} ViewContext
 * @property {(name: string) => any} get  a synced trait
 * @property {(name: string) => {values: Float32Array, shape: number[]}} decoded  a binary trait, decoded once per payload
 * @property {(layer: number) => any} [layerData]  a layer of the shown run the page holds (decoded), or null
 * @property {() => any} neuronData  the open query's numbers, {error}, or null while they are asked for
 * @property {{row: (p: object) => any, tile: (p: object) => any, window?: (p: object) => any, refined?: (p: object) => any}} long  exact rows and tiles of a long run (requests.js); refined: a large tile in passes
 * @property {boolean} maskMode  clicks in the model view mask heads
 * @property {number} width  px the open view may use (0 when unknown)
 * @property {number} [height]  px the open view may use in a box of fixed size (a slide), 0 elsewhere
 */

/**
 * What a view does for the widget; draw() returns the status line ("" when drawn).
 * @typedef {object} ViewAdapter
 * @property {string} name
 * @property {string} label
 * @property {string[]} modes  "short" (the run keeps its full attention), "long" (attention on request) or both
 * @property {object[]} thinning  the picture's thinner versions' options, tried in turn (src/attnscope/views.py)
 * @property {(body: HTMLElement, actions: {setTraits: (values: object, options?: {now?: boolean}) => void, redraw: () => void}, get: (name: string) => any) => any} create
 * @property {(view: any, context: ViewContext) => string} draw
 * @property {(context: ViewContext, options: object) => object | string} picture  the view as a scene from the
 *   state alone, no DOM (the kernel's picture of a saved output, js/picture.js), or why there is none
 * @property {(context: ViewContext) => string} title  the image's title
 * @property {string[]} shows  what of the state this view's drawing depends on, beyond its title
 *   (imageCaption says it under the title of its images and pictures)
 */

/** A view's name, tab label and modes, as src/attnscope/views.py declares them. */
function declared(name) {
  const view = DECLARED_VIEWS.find((v) => v.name === name);
  if (!view) throw new Error(`no view ${name} in src/attnscope/views.py`);
  return view;
}

function keyTokens(get) {
  const keys = get("key_tokens");
  return keys?.length ? keys : null; // cross-attention only
}

const layerTitle = ({ get }) => `${get("model_name")} · layer ${get("layer")}`;

// A long run's head view shows a window of its text; the token slices are kept while the window
// and the run stay, so a redraw does not rebuild (and un-hover) the token columns.
function windowTokens(memo, tokens, notes, start, end) {
  const key = `${start}:${end}`;
  if (memo.window?.tokens !== tokens || memo.window.key !== key) {
    memo.window = { tokens, key, shown: tokens.slice(start, end), notes: (notes ?? []).slice(start, end) };
  }
  return memo.window;
}

const count = (n) => n.toLocaleString("en");

// Inside a window of a long text most weights are small (a row spreads over thousands of tokens,
// much of it on a sink): the lines are drawn relative to the window's largest weight, leaving out
// the columns of tokens set aside (sinks), which are drawn at full strength.
function relativeWindow(win, aside) {
  const [nHeads, nRows, nCols] = win.shape;
  const { values } = win;
  const skip = Math.max(0, (aside ?? 0) - win.rows[0]);
  let largest = 0;
  for (let i = 0; i < values.length; i++) if (i % nCols >= skip && values[i] > largest) largest = values[i];
  if (!(largest > 0)) return { values, largest: 1 };
  const relative = new Float32Array(nHeads * nRows * nCols);
  for (let i = 0; i < values.length; i++) relative[i] = Math.min(1, values[i] / largest);
  return { values: relative, largest };
}

/** The head view's state on a long run (the window around the selected token), or a status line.
 * memo keeps the slices and relative weights between draws (the view's own object on screen). */
function windowState({ get, long }, memo = {}) {
  const tokens = get("tokens");
  const selected = get("focus_token");
  const answer = long.window({ result_id: get("result_id"), layer: get("layer"), token: selected });
  if (answer?.error) return answer.error;
  const win = answered(answer, (a) => a.n_tokens === tokens.length && a.shape[0] === get("n_heads"));
  if (!win) return "computing…";
  const [start, end] = win.rows;
  const { shown, notes } = windowTokens(memo, tokens, get("token_notes"), start, end);
  if (memo.relative?.of !== win || memo.relative.aside !== get("sink_aside")) {
    memo.relative = { of: win, aside: get("sink_aside"), ...relativeWindow(win, get("sink_aside")) };
  }
  const { values, largest } = memo.relative;
  return {
    start,
    tokens: shown,
    tokenNotes: notes,
    keyTokens: null,
    causal: Boolean(get("causal")),
    sentenceBStart: null,
    attention: { values, shape: win.shape },
    weightScale: largest,
    visibleHeads: get("heads"),
    sentenceFilter: "all",
    selected: selected - start,
    caption: `Tokens ${count(start)}–${count(end - 1)} of ${count(tokens.length)}, around token ${count(selected)} `
      + `${tokenCaption(tokens[selected], get("token_notes")?.[selected])}, layer ${get("layer")}: each line is as opaque `
      + `as its exact weight relative to the window's largest, ${largest.toPrecision(2)}; what a token gives to tokens `
      + "outside this window is not drawn.",
  };
}

// What the screen adds to the window's caption (images are read where nothing can be clicked).
const WINDOW_HINT = "Click a token to move there.";

// Per head view on screen: its window's slices, relative weights, start and the token scrolled to.
const windowMemos = new WeakMap();

function drawWindow(view, context) {
  const memo = windowMemos.get(view);
  const state = windowState(context, memo);
  if (typeof state === "string") return state;
  memo.start = state.start;
  view.update({ ...state, hint: WINDOW_HINT });
  const selected = state.start + state.selected;
  if (memo.scrolledTo !== selected) view.scrollToToken(state.selected);
  memo.scrolledTo = selected;
  return "";
}

/** The head view's state on a short run (the open layer's attention), or a status line.
 * @param {ViewContext} context */
function headState({ get, decoded, layerData }) {
  const payload = get("attention");
  // A layer the page holds draws at once; the trait's (the kernel's answer to the switch) otherwise.
  const held = layerData?.(get("layer"));
  if (!held && (!payload || payload.layer !== get("layer"))) return "loading layer…";
  const attention = held ?? decoded("attention");
  const tokens = get("tokens");
  const nHeads = get("n_heads");
  const keys = keyTokens(get);
  const [h, t1, t2] = attention.shape;
  if (h !== nHeads || t1 !== tokens.length || t2 !== (keys ?? tokens).length) {
    throw new Error(`attention of shape [${attention.shape}] does not match ${nHeads} heads × ${tokens.length} tokens`);
  }
  const sentenceBStart = get("sentence_b_start");
  return {
    tokens,
    tokenNotes: get("token_notes"),
    keyTokens: keys,
    keyNotes: get("key_token_notes"),
    causal: Boolean(get("causal")),
    sentenceBStart,
    attention,
    visibleHeads: get("heads"),
    sentenceFilter: sentenceBStart === null ? "all" : get("sentence_filter"),
  };
}

// A view's state, or the status line that says why there is none yet, drawn into the view.
function shown(view, state) {
  if (typeof state === "string") return state;
  view.update(state);
  return "";
}
// A view's state as a scene by its image function, or the status line.
const imaged = (state, image, options) => (typeof state === "string" ? state : image(state, options));

/** @type {ViewAdapter} */
const head = {
  ...declared("head"),
  create(body, { setTraits }, get) {
    const view = createHeadView(body, {
      onToggleHead(h) {
        const heads = new Set(get("heads"));
        if (heads.has(h)) heads.delete(h); else heads.add(h);
        const visible = [...heads].sort((a, b) => a - b);
        // Drawn in the click itself, not a frame later: a toggle is the page's alone.
        setTraits(visible.length === 1 ? { heads: visible, neuron_head: visible[0] } : { heads: visible }, { now: true });
      },
      onSoloHead(h) {
        const heads = get("heads");
        const all = [...Array(get("n_heads")).keys()];
        // The head shown alone is the one the neuron view opens on.
        setTraits(heads.length === 1 && heads[0] === h ? { heads: all } : { heads: [h], neuron_head: h }, { now: true });
      },
      // A long run's window: a click selects the token for every long view.
      onSelectToken: (i) => { if (get("long_context")) setTraits({ focus_token: memo.start + i }); },
    });
    const memo = { start: 0 };
    windowMemos.set(view, memo);
    return view;
  },
  draw(view, context) {
    return context.get("long_context") ? drawWindow(view, context) : shown(view, headState(context));
  },
  picture: (context, options) => imaged(context.get("long_context") ? windowState(context) : headState(context), headScene, options),
  title: layerTitle,
  shows: ["notice", "part", "masked", "change", "words", "filter", "heads", "causal", "aside"],
};

// A head clicked in the model or analysis view opens in the head view, or in the map for a long run.
const openHead = (setTraits, get) => (layer, h) => setTraits(get("long_context")
  ? { view: "map", layer, focus_head: h }
  : { view: "head", layer, heads: [h], neuron_head: h });


function modelState({ get, decoded, long, maskMode, width, height = 0 }) {
  const payload = get("thumbnails");
  const base = { nHeads: get("n_heads"), masked: get("masked_heads") ?? [], maskMode, width, height,
    tokens: get("tokens"), keyTokens: keyTokens(get) };
  if (payload?.data && payload.n_tokens === get("tokens").length) {
    return { ...base, thumbnails: decoded("thumbnails"), layers: payload.layers, heads: payload.heads };
  }
  // A long run's thumbnails too large to make at once come in passes, drawn as they refine.
  if (get("long_context") && long?.thumbnails && !payload?.data) {
    const refined = long.thumbnails({ result_id: get("result_id"), layers: get("include_layers"), heads: get("include_heads") });
    if (refined?.error) return refined.error;
    if (refined && refined.n_tokens === get("tokens").length) {
      const note = refined.passesDone < refined.passes
        ? `Refining: each cell is the largest weight of ${Math.round((100 * refined.passesDone) / refined.passes)}% of its rows so far.` : "";
      return { ...base, thumbnails: { values: refined.values, shape: refined.shape }, layers: refined.layers, heads: refined.heads, note };
    }
  }
  return "loading thumbnails…";
}

/** @type {ViewAdapter} */
const model = {
  ...declared("model"),
  create(body, { setTraits }, get) {
    return createModelView(body, {
      onOpenHead: openHead(setTraits, get),
      onToggleMask(layer, h) {
        const current = get("masked_heads") ?? [];
        const masked = current.filter(([l, m]) => !(l === layer && m === h));
        if (masked.length === current.length) masked.push([layer, h]);
        setTraits({ masked_heads: masked });
      },
    });
  },
  draw: (view, context) => shown(view, modelState(context)),
  picture: (context, options) => imaged(modelState(context), modelImage, options),
  title: ({ get }) => get("model_name"),
  shows: ["notice", "part", "masked", "change", "words", "included"],
};

function neuronState({ get, neuronData }) {
  const base = { tokens: get("tokens"), tokenNotes: get("token_notes"), keyTokens: keyTokens(get),
    keyNotes: get("key_token_notes"), nHeads: get("n_heads"),
    head: get("neuron_head"), query: get("neuron_query") };
  let message = "";
  if (get("word_level")) message = "The neuron view is per token: switch off Words to see it.";
  else if (get("neuron_unavailable")) message = get("neuron_unavailable"); // the kernel says why
  const data = message ? null : neuronData();
  if (data?.error) message = data.error;
  if (!data && !message) return "loading…";
  return { ...base, data: message ? null : data, message };
}

/** @type {ViewAdapter} */
const neuron = {
  ...declared("neuron"),
  create(body, { setTraits }) {
    return createNeuronView(body, {
      onQuery: (query) => setTraits({ neuron_query: query }),
      onHead: (h) => setTraits({ neuron_head: h }),
    });
  },
  draw: (view, context) => shown(view, neuronState(context)),
  picture(context, options) {
    const state = neuronState(context);
    // Why there are no numbers is the picture's line, as it is the tab's.
    return typeof state !== "string" && state.message ? state.message : imaged(state, neuronScene, options);
  },
  title: layerTitle,
  shows: ["notice", "part", "masked"],
};

function rolloutState({ get, decoded }) {
  const payload = get("rollout");
  const tokens = get("tokens");
  if (payload?.error) return payload.error;
  if (!payload?.data || payload.n_tokens !== tokens.length) return "loading rollout…";
  const { values, shape } = decoded("rollout");
  return {
    title: "Attention rollout (Abnar & Zuidema 2020): how much each input token (column) flows into each position (row) after the chosen layer",
    tokens, notes: get("token_notes"), values, shape, layer: shape[0] - 1, special: payload.special ?? [], valueLabel: "rollout",
    layerLabel: (i) => `Rolled out through layer ${i}`,
  };
}

/** @type {ViewAdapter} */
const rollout = {
  ...declared("rollout"),
  create: (body) => createMatrixView(body),
  draw: (view, context) => shown(view, rolloutState(context)),
  picture: (context, options) => imaged(rolloutState(context), matrixImage, options),
  title: ({ get }) => `${get("model_name")} · attention rollout`,
  shows: ["notice", "masked", "words"],
};

const NO_ANALYSIS = "No analysis yet: call widget.show_analysis(attnscope.head_stats(model, texts)).";

// JSON has no NaN or infinity: the kernel sends a missing value as null and ±∞ as "inf" / "-inf"
// (payloads.json_number).
const analysisNumber = (v) => (v === null ? NaN : v === "inf" ? Infinity : v === "-inf" ? -Infinity : v);

/** The analysis tab's state: {note, scatter, state} for the heatmap or the MDS scatter, or a line
 * saying there is none. */
function analysisState({ get, decoded, width }) {
  const analysis = get("analysis");
  if (!analysis?.kind) return NO_ANALYSIS;
  const { n_layers: nLayers, n_heads: nHeads } = analysis;
  if (analysis.kind === "head_distances") {
    const thumbs = get("thumbnails");
    // The scatter's hover shows a head's thumbnail when every head's is there.
    const complete = thumbs?.data && thumbs.layers.length === nLayers && thumbs.heads.length === nHeads;
    return { note: analysis.note, scatter: true, state: { nLayers, nHeads, points: Float32Array.from(analysis.points),
      behaviours: analysis.behaviours, colorBy: "behaviour", thumbnails: complete ? decoded("thumbnails") : null, width } };
  }
  const measures = analysis.measures.map((m) => ({ key: m.key, label: m.label, max: m.max,
    values: Float32Array.from(m.values, analysisNumber) }));
  return { note: analysis.note, scatter: false, state: { nLayers, nHeads, measures, measure: analysis.measure } };
}

// What the screen adds to an analysis's note (its pictures carry the note alone).
const OPEN_HEAD_HINT = "Click a head to open it.";

// The analysis tab shows one of two views, by the kind of analysis the kernel sent.
function createAnalysisView(body, { setTraits }, get) {
  const note = el("div", "attnscope-hint", body);
  const heatmapBox = el("div", "", body);
  const scatterBox = el("div", "", body);
  const heatmap = createHeadMapView(heatmapBox, { onOpenHead: openHead(setTraits, get) });
  const scatter = createHeadScatterView(scatterBox, { onOpenHead: openHead(setTraits, get) });
  const shown = () => (scatterBox.hidden ? heatmap : scatter);
  return {
    update(shownState) {
      if (typeof shownState === "string") {
        note.textContent = shownState;
        heatmapBox.hidden = scatterBox.hidden = true;
        return;
      }
      note.textContent = [shownState.note, OPEN_HEAD_HINT].filter(Boolean).join(" ");
      heatmapBox.hidden = shownState.scatter;
      scatterBox.hidden = !shownState.scatter;
      (shownState.scatter ? scatter : heatmap).update(shownState.state);
    },
    toSvg: (options) => shown().toSvg(options),
    toPng: (options) => shown().toPng(options),
    destroy() {
      heatmap.destroy();
      scatter.destroy();
    },
  };
}

/** @type {ViewAdapter} */
const analysis = {
  ...declared("analysis"),
  create: createAnalysisView,
  draw(view, context) {
    view.update(analysisState(context));
    return "";
  },
  picture(context, options) {
    const state = analysisState(context);
    if (typeof state === "string") return state;
    return state.scatter ? scatterScene(state.state, "behaviour", options) : heatmapImage(state.state, options);
  },
  title: ({ get }) => get("model_name"),
  shows: ["analysis"],
};

// The long views ask for the open layer's rows and tiles of one head, or of the mean (head −1).
const longParams = (get) => ({ result_id: get("result_id"), layer: get("layer"), head: get("focus_head") });
const answered = (answer, check) => (answer && !answer.error && check(answer) ? answer : null);
// What both long views write: the selected token, the head and the tokens set aside.
const longCallbacks = (setTraits) => ({
  onSelect: (token) => setTraits({ focus_token: token }, { now: true }), // its row is asked for in the click
  onHead: (h) => setTraits({ focus_head: h }),
  onAside: (n) => setTraits({ sink_aside: n }),
});

// The text view's state: the shading of the selected token's row or column (values null while asked for).
function textState({ get, long }) {
  const tokens = get("tokens");
  const selected = get("focus_token");
  const answer = long.row({ ...longParams(get), token: selected, direction: get("direction") });
  const row = answered(answer, (a) => a.values.length === tokens.length);
  return { tokens, notes: get("token_notes"), reading: get("token_reading"), selected, values: row?.values ?? null, message: answer?.error ?? "",
    head: get("focus_head"), nHeads: get("n_heads"), nKeyHeads: get("n_key_heads"), direction: get("direction"),
    aside: get("sink_aside"), layer: get("layer"), model: get("model_name") };
}

/** @type {ViewAdapter} */
const text = {
  ...declared("text"),
  create(body, { setTraits }) {
    return createTextView(body, { ...longCallbacks(setTraits), onDirection: (direction) => setTraits({ direction }) });
  },
  draw(view, context) {
    const state = textState(context);
    const moved = view.selected !== state.selected;
    view.update(state);
    if (moved) view.scrollToSelected();
    view.selected = state.selected;
    return state.message ? "" : state.values ? "" : "computing…";
  },
  picture(context, options) {
    const state = textState(context);
    return state.message || (state.values ? textScene(state, options) : "computing…");
  },
  title: layerTitle,
  shows: ["notice"], // its colour bars name the tokens set aside
};

/** @type {ViewAdapter} */
const map = {
  ...declared("map"),
  create(body, { setTraits, redraw }) {
    return createMapView(body, { ...longCallbacks(setTraits), onReduce: (reduce) => setTraits({ map_reduce: reduce }), onZoom: redraw });
  },
  draw(view, { get, long, width }) {
    const tokens = get("tokens");
    const n = tokens.length;
    const base = { ...longParams(get), reduce: get("map_reduce") };
    const region = view.region(n);
    // Large maps come in passes, each over a share of the rows: drawn at once, then refined.
    const overview = long.refined({ ...base, ...tileRequest(wholeMap(n), n) });
    const zoomed = long.refined({ ...base, ...tileRequest(view.settled(n), n) });
    // The zoomed tile once it came and still covers what is shown; the overview until then.
    const covers = (t) => t.n_tokens === n && t.rows[0] <= region.r0 && t.rows[1] >= region.r1 && t.cols[0] <= region.c0 && t.cols[1] >= region.c1;
    const tile = answered(zoomed, covers) ?? answered(overview, covers);
    view.update({ tokens, notes: get("token_notes"), n, tile, aside: get("sink_aside"), selected: get("focus_token"),
      head: get("focus_head"), nHeads: get("n_heads"), nKeyHeads: get("n_key_heads"), layer: get("layer"),
      reduce: get("map_reduce"), model: get("model_name"), width, message: (overview?.error || zoomed?.error) ?? "" });
    if (overview?.error || zoomed?.error) return "";
    if (!tile) return "computing…";
    if (tile !== zoomed) return "zooming…";
    return tile.passesDone < tile.passes ? "refining…" : "";
  },
  // The picture is the whole map (a saved output cannot zoom).
  picture({ get, long, width }, options) {
    const n = get("tokens").length;
    const overview = long.tile({ ...longParams(get), reduce: get("map_reduce"), ...tileRequest(wholeMap(n), n) });
    if (overview?.error) return overview.error;
    if (!overview) return "computing…";
    const state = { tokens: get("tokens"), notes: get("token_notes"), n, tile: overview, aside: get("sink_aside"),
      selected: get("focus_token"), head: get("focus_head"), layer: get("layer"), reduce: get("map_reduce"),
      model: get("model_name"), region: wholeMap(n) };
    return mapScene(state, mapSize(width), options).scene;
  },
  title: layerTitle,
  shows: ["notice"], // its colour bars name the tokens set aside
};

/** A setting's name as its control shows it ([[value, label], ...]). */
const labelOf = (table, value) => table.find(([v]) => v === value)?.[1] ?? String(value);
const listed = (items) => (items.length > 1 ? `${items.slice(0, -1).join(", ")} and ${items.at(-1)}` : items.join(""));

// What each piece of state changes in a drawing, said in words for a reader of an image, who has
// no controls to look at: one sentence each, or "" where the state draws as usual.
const SAYS = {
  notice: ({ get }) => (get("notice") ?? "").split("\n")
    // A long run's notice also says how its attention is kept, which the drawing does not show.
    .filter((line) => line && (!get("long_context") || /truncated/i.test(line))).join(" "),
  part({ get }) {
    if ((get("parts") ?? []).length < 2) return "";
    return `${labelOf(PARTS, get("attention_part"))} attention.`;
  },
  masked({ get }) {
    const masked = get("masked_heads") ?? [];
    if (!masked.length) return "";
    return `Masked (switched off, as Michel et al. 2019): ${listed(masked.map(([l, h]) => headName(l, h)))}; `
      + "every later layer is recomputed without them.";
  },
  change({ get }) {
    if (!get("show_change") || !(get("masked_heads") ?? []).length) return "";
    return "Show change: each line is |A_masked − A|, how much masking changed that weight, scaled so that the "
      + "largest change is a full line; the first masked head's layer and those before it do not change, so they are empty."
      + (get("mask_summary") ? ` ${get("mask_summary")}` : "");
  },
  words: ({ get }) => (get("word_level")
    ? "Word level: wordpieces merged into words (attention to a word summed over its pieces, from a word averaged)." : ""),
  filter({ get }) {
    if (get("sentence_b_start") === null || get("sentence_filter") === "all") return "";
    const [from, to] = get("sentence_filter").toUpperCase();
    return `Only sentence ${from} → sentence ${to} attention is drawn (sentence ${from}'s tokens attending to sentence ${to}'s).`;
  },
  heads({ get }) {
    const shown = [...(get("heads") ?? [])].sort((a, b) => a - b);
    const n = get("n_heads");
    return shown.length < n ? `${shown.length === 1 ? "Head" : "Heads"} ${listed(shown.map(String))} of ${n} (0–${n - 1}) drawn.` : "";
  },
  causal: ({ get }) => (get("causal") ? CAUSAL_NOTE : ""),
  included({ get }) {
    const some = (name, total, what) => {
      const chosen = get(name);
      return chosen && chosen.length < total ? `${what} ${listed(chosen.map(String))} of 0–${total - 1}` : "";
    };
    const parts = [some("include_layers", get("n_layers"), "layers"), some("include_heads", get("n_heads"), "heads")].filter(Boolean);
    return parts.length ? `Only ${parts.join("; ")}.` : "";
  },
  // A long run's head view scales its window's lines leaving these tokens out.
  aside({ get }) {
    const n = get("sink_aside");
    return n > 0 && get("long_context")
      ? `The first ${n === 1 ? "token is" : `${n} tokens are`} set aside (attention sinks): the window's largest weight is taken without them.`
      : "";
  },
  analysis: ({ get }) => get("analysis")?.note ?? "",
};

/** The sentences under an image's title that say what state it shows (a reader of a saved
 * picture or an exported image has no controls to look at), for the view named `name`. */
export function imageCaption(context, name) {
  const adapter = VIEWS.find((v) => v.name === name);
  return (adapter?.shows ?? []).map((what) => SAYS[what](context)).filter(Boolean);
}

/** The views in tab order; a run shows those of its mode (long_context or not). */
const ADAPTERS = { head, model, neuron, rollout, text, map, analysis };
/** Every view, in the tabs' order of src/attnscope/views.py (through js/contract.js). */
export const VIEWS = DECLARED_VIEWS.map(({ name }) => ADAPTERS[name]);
