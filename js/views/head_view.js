// The head view: tokens in two columns (attention FROM on the left, TO on the right) joined by
// one line per visible head, coloured by head, as opaque as the attention weight.
// The drawing takes data and callbacks, never the widget model, so a plain page can test it; the
// adapter at the end reads the synced state for it (a long run's window: head_window.js).
import { headColors } from "../drawing/colors.js";
import { el, tokenCaption, tokenText } from "../drawing/dom.js";
import { headText } from "../drawing/labels.js";
import { headSwatches, headSwatchesScene } from "../drawing/legend.js";
import { createLineTiles } from "../drawing/line_tiles.js";
import { measureOf, oneScaleNote, oneScale } from "../drawing/one_scale.js";
import { createScene, imageMethods } from "../drawing/scene.js";
import { textWidth, wrapText } from "../drawing/svg.js";
import { drawWindow, followSelected, windowMemos, windowState } from "./head_window.js";
import { createKnockoutControl, knockoutState } from "../controls/knockout_control.js";
import { declared, imaged, keyTokens, layerTitle, shown } from "./view_adapter.js";
import { BAR_PX, computeLines, DEFAULT_MIN_WEIGHT, LINE_BUDGET, LINES_WIDTH, lineEnds, rangesFor, ROW_HEIGHT, strongestLines, strongestLinesOf, warmStrongestLines } from "./head_lines.js";

function firstTokens(state, max) {
  const [nHeads, nQueries, nKeys] = state.attention.shape;
  if (nQueries <= max && nKeys <= max) return state;
  const [q, k] = [Math.min(nQueries, max), Math.min(nKeys, max)];
  const all = state.attention.values;
  const values = new Float32Array(nHeads * q * k);
  for (let h = 0; h < nHeads; h++) {
    for (let i = 0; i < q; i++) values.set(all.subarray((h * nQueries + i) * nKeys, (h * nQueries + i) * nKeys + k), (h * q + i) * k);
  }
  const bStart = state.sentenceBStart !== null && state.sentenceBStart < q ? state.sentenceBStart : null;
  return { ...state, attention: { values, shape: [nHeads, q, k] }, tokens: state.tokens.slice(0, q),
    keyTokens: state.keyTokens ? state.keyTokens.slice(0, k) : state.keyTokens,
    sentenceBStart: bStart, sentenceFilter: bStart === null ? "all" : state.sentenceFilter,
    selected: state.selected !== undefined && state.selected < q ? state.selected : undefined };
}

/** What a view thinned to its strongest lines says it left out (weights as the user reads them).
 * An image says no more: it is read where nothing can be hovered. */
function thinnedNote(budget, weightScale = 1, name = "weight") {
  const weight = weightScale === 1 ? budget.minWeight : (budget.minWeight * weightScale).toPrecision(2);
  // The threshold in what the lines draw (‖αf(x)‖, a change), as the caption above names it.
  return `Showing the ${budget.kept.toLocaleString("en")} strongest lines (${name} ≥ ${weight}) of `
    + `${budget.total.toLocaleString("en")}.`;
}
const THINNED_HINT = "Hover a token to see all of its lines.";

/** The row a state draws alone (a generation's selected output token: what it looked at when the
 * model wrote it), as a hover on its query draws it; null where every row is drawn. */
export function rowFocus(state) {
  const { selected = -1, rowOnly = false } = state;
  return rowOnly && selected >= 0 && selected < state.attention.shape[1] ? { side: "left", index: selected } : null;
}

export const CAUSAL_NOTE = "Causal attention: each token sees only itself and earlier tokens; later ones are masked (no lines).";

/**
 * What the causal note says of a run whose rows are causal from token `from` on: an
 * encoder-decoder's generation puts the source first, whose rows (the encoder's) read the whole
 * source, so the note says which rows it is true of.
 * @param {number} from  the `causal_from` trait
 */
export function causalNote(from = 0) {
  if (!(from > 0)) return CAUSAL_NOTE;
  return `Causal attention from token ${from.toLocaleString("en")} on (the decoder's): each sees the source, itself and `
    + "earlier output tokens; later ones are masked (no lines). The source's tokens before it (the encoder's) see the whole source.";
}

/**
 * The head view as an image: title, caption, head swatches, the two token columns and every line
 * the view draws without hover. Token rows sit at the screen's pitch (ROW_HEIGHT) beside the lines' ends.
 */
export function headScene(fullState, { title = "", lineBudget = LINE_BUDGET, maxTokens = Infinity } = {}) {
  const state = firstTokens(fullState, maxTokens);
  const { attention, visibleHeads, sentenceFilter, sentenceBStart, tokens, keyTokens } = state;
  const shown = { visibleHeads, sentenceFilter, sentenceBStart };
  const focus = rowFocus(state);
  const budget = focus ? null : strongestLines(attention, shown, lineBudget);
  const all = budget ? budget.lines : computeLines(attention, { ...shown, hover: focus });
  const ranges = rangesFor(attention.shape, sentenceBStart, sentenceFilter);
  const leftTokens = tokens.slice(...ranges.from);
  const rightTokens = (keyTokens ?? tokens).slice(...ranges.to);
  const leftWidth = Math.max(40, ...leftTokens.map((t) => textWidth(t))) + 12;
  const rightWidth = Math.max(40, ...rightTokens.map((t) => textWidth(t))) + 12;
  const width = leftWidth + LINES_WIDTH + rightWidth;
  const cut = state.tokens.length < fullState.tokens.length
    ? `The first ${state.tokens.length} of ${fullState.tokens.length.toLocaleString("en")} tokens.` : "";
  const notes = [state.caption, cut, budget && budget.minWeight > DEFAULT_MIN_WEIGHT ? thinnedNote(budget, state.weightScale, state.lineMeasure) : ""].filter(Boolean);
  const captionLines = notes.flatMap((note) => wrapText(note, width - 12, 11));
  const swatchTop = 24 + captionLines.length * 15;
  const swatches = headSwatches([...visibleHeads].sort((a, b) => a - b), width - 8);
  const top = swatchTop + swatches.height;
  const rows = Math.max(leftTokens.length, rightTokens.length, 1);
  const s = createScene(width, top + rows * ROW_HEIGHT + 8);
  s.text(6, 12, title, { role: "title" });
  captionLines.forEach((line, i) => { s.text(6, 28 + i * 15, line, { size: 11, role: "subtitle" }); });
  const colors = headColors(attention.shape[0]);
  headSwatchesScene(s, 6, swatchTop, swatches, colors);
  const rowY = (i) => top + (i + 0.5) * ROW_HEIGHT;
  leftTokens.forEach((t, i) => { s.text(leftWidth - 6, rowY(i), t, { anchor: "end", role: "token-left" }); });
  rightTokens.forEach((t, i) => { s.text(leftWidth + LINES_WIDTH + 6, rowY(i), t, { role: "token-right" }); });
  // The selected token underlined in red in both columns, as the text view marks it.
  const selected = state.selected ?? -1;
  if (selected >= ranges.from[0] && selected < ranges.from[1]) {
    const i = selected - ranges.from[0];
    s.segment(leftWidth - 6 - textWidth(tokens[selected]), rowY(i) + 8, leftWidth - 6, rowY(i) + 8, "#d62728", 2);
  }
  if (!keyTokens && selected >= ranges.to[0] && selected < ranges.to[1]) {
    const i = selected - ranges.to[0];
    s.segment(leftWidth + LINES_WIDTH + 6, rowY(i) + 8, leftWidth + LINES_WIDTH + 6 + textWidth(tokens[selected]), rowY(i) + 8, "#d62728", 2);
  }
  s.lines(all, (line) => colors[line.head], lineEnds(ranges, leftWidth, top));
  return s.scene;
}

/**
 * createHeadView(container, {onToggleHead, onSoloHead, onSelectToken}) → {update(state), lastLines(), scrollToToken(i), scene, toSvg, toPng, destroy()}
 * state: {tokens, tokenNotes?, keyTokens?, keyNotes?, sentenceBStart, attention: {values, shape}, visibleHeads, sentenceFilter,
 *   caption?, hint?, selected?, weightScale?, measure?, lineMeasure?, causal?, causalFrom?}
 * causal: the causal note shows, saying which rows it is true of from causalFrom (causalNote).
 * keyTokens: the right column when the keys are other tokens (cross-attention); default tokens.
 * caption: a line above the plot (a long text's window says which tokens it shows), which images
 * show too; hint: what the screen adds to it (how to interact; images leave it out); selected: the
 * index of a token marked in both columns; onSelectToken(i) is called when a token is clicked;
 * weightScale: the attention's values are weights ÷ weightScale (a long text's window is drawn
 * relative to its largest weight, a difference to the run's largest), and the numbers shown are
 * multiplied back; measure: what the numbers are, "Attention" unless given (a difference's name);
 * lineMeasure: what one value is called in the thinned lines' threshold ("weight" unless given: ‖αf(x)‖, change).
 */
export function createHeadView(container, callbacks = {}) {
  const root = el("div", "attnscope-head-view", container);
  // The swatches and notes stay in sight while the token columns scroll (a long text's window
  // opens scrolled to its last token, 1,600 px below them).
  const legend = el("div", "attnscope-head-legend", root);
  const swatchRow = el("div", "attnscope-heads", legend);
  const causalLine = el("div", "attnscope-hint attnscope-causal-note", legend);
  causalLine.hidden = true;
  const caption = el("div", "attnscope-hint attnscope-window-note", legend);
  caption.hidden = true;
  const note = el("div", "attnscope-hint attnscope-lines-note", legend);
  note.hidden = true;
  const plot = el("div", "attnscope-plot", root);
  plot.style.setProperty("--as-row", `${ROW_HEIGHT}px`); // the rows where headScene puts the labels
  const left = el("div", "attnscope-tokens attnscope-left", plot);
  // As tall as the token columns; its canvas tiles hold the lines where the plot is in view.
  const linesBox = el("div", "attnscope-lines", plot);
  linesBox.style.width = `${LINES_WIDTH}px`;
  const tiles = createLineTiles(linesBox, { width: LINES_WIDTH });
  const right = el("div", "attnscope-tokens attnscope-right", plot);
  linesBox.dataset.lineCount = "0";

  let state = null;
  let markedRow = null; // the token row marked selected (a finder example's query)
  let hover = null;
  let lines = [];
  let swatchHeads = -1;

  function drawSwatches() {
    const n = state.attention.shape[0];
    const colors = headColors(n);
    const visible = new Set(state.visibleHeads);
    if (swatchHeads !== n) {
      swatchRow.replaceChildren();
      for (let h = 0; h < n; h++) {
        const swatch = el("button", "attnscope-swatch", swatchRow);
        swatch.type = "button";
        swatch.dataset.head = String(h);
        swatch.textContent = String(h);
        swatch.style.setProperty("--head-color", colors[h]);
        swatch.title = `${headText(h)}: click to toggle, double-click to show it alone`;
        // A click toggles at once (waiting to tell it from a double-click cost 220 ms a toggle);
        // a double-click's two clicks toggle the head twice, back as it was, then show it alone.
        swatch.addEventListener("click", () => callbacks.onToggleHead?.(h));
        swatch.addEventListener("dblclick", () => callbacks.onSoloHead?.(h));
      }
      swatchHeads = n;
    }
    for (const swatch of swatchRow.children) {
      const on = visible.has(Number(swatch.dataset.head));
      swatch.classList.toggle("attnscope-off", !on);
      swatch.setAttribute("aria-pressed", String(on));
    }
  }

  // Each row's token and note as last written: an edit that changes a word rewrites its rows
  // only, and the page lays out those, not 1,000 new ones.
  const rowText = new WeakMap();

  /** @param {HTMLElement} column @param {string} side @param {number[]} range @param {string[]} tokens */
  function fillColumn(column, side, range, tokens, notes = []) {
    const [lo, hi] = range;
    const rows = column.children;
    const reuse = rows.length === hi - lo && (rows.length === 0 || Number(/** @type {HTMLElement} */ (rows[0]).dataset.index) === lo);
    if (!reuse) column.replaceChildren();
    for (let i = lo; i < hi; i++) {
      const note = notes[i] ?? "";
      if (reuse) {
        const row = /** @type {HTMLElement} */ (rows[i - lo]);
        const was = rowText.get(row);
        if (was.token !== tokens[i] || was.note !== note) {
          row.firstChild.remove();
          row.prepend(tokenText(document.createDocumentFragment(), tokens[i], note));
          rowText.set(row, { token: tokens[i], note });
        }
        continue;
      }
      const row = el("div", "attnscope-token", column);
      row.dataset.index = String(i);
      tokenText(row, tokens[i], note);
      rowText.set(row, { token: tokens[i], note });
      el("span", "attnscope-weights", row);
      row.addEventListener("mouseenter", () => { hover = { side, index: i }; paint(); });
      row.addEventListener("mouseleave", () => { hover = null; paint(); });
      if (callbacks.onSelectToken) row.addEventListener("click", () => callbacks.onSelectToken(i));
    }
  }

  // The weights as the user reads them: the drawn ones may be relative to a window's largest.
  const shownWeight = (w, digits) => {
    const scale = state.weightScale ?? 1;
    return scale === 1 ? w.toFixed(digits) : (w * scale).toPrecision(digits);
  };

  // The rows a hover wrote to (its token's, and those given weights): only they are cleared after,
  // not all 1,000 rows of both columns (each write invalidates the page's layout).
  let written = [];
  function showWeights() {
    for (const row of written) {
      row.classList.remove("attnscope-hovered");
      row.lastChild.replaceChildren();
      row.title = "";
    }
    written = [];
    const hover = focused();
    if (!hover) return;
    const own = hover.side === "left" ? left : right;
    const other = hover.side === "left" ? right : left;
    const colors = headColors(state.attention.shape[0]);
    for (const row of own.children) {
      if (Number(row.dataset.index) === hover.index) {
        row.classList.add("attnscope-hovered");
        written.push(row);
      }
    }
    const byToken = new Map();
    for (const line of lines) {
      const j = hover.side === "left" ? line.to : line.from;
      if (!byToken.has(j)) byToken.set(j, []);
      byToken.get(j).push(line);
    }
    const filled = [];
    for (const row of other.children) {
      const found = byToken.get(Number(row.dataset.index)) ?? [];
      if (!found.length) continue;
      const box = row.lastChild;
      // The number sits next to the token, the bars beyond it (outward, away from the lines).
      const label = el("span", "attnscope-weight-value");
      // One bar per visible head; the number is the largest of them, and says so ("max") where there are several.
      const largest = shownWeight(Math.max(...found.map((l) => l.weight)), 2);
      label.textContent = found.length > 1 ? `max ${largest}` : largest;
      const bars = found.map((line) => {
        const bar = el("span", "attnscope-weight-bar");
        bar.style.background = colors[line.head];
        return bar;
      });
      box.append(...(other === left ? [...bars, label] : [label, ...bars]));
      // The row's hover card names the pair and gives each head's weight (heads from 0).
      const j = Number(row.dataset.index);
      const [from, to] = hover.side === "left" ? [hover.index, j] : [j, hover.index];
      const pair = `${state.measure ?? "Attention"} from ${tokenCaption(state.tokens[from])} to ${tokenCaption((state.keyTokens ?? state.tokens)[to])}`;
      const what = found.length > 1 ? "one bar a head, the number their largest" : "the bar and the number";
      row.title = [`${pair} (${what}):`, ...found.map((l) => `head ${l.head}: ${shownWeight(l.weight, 3)}`)].join("\n");
      written.push(row);
      filled.push({ row, bars, found, label, largest });
    }
    fitBars(filled, other === left ? "left" : "right");
  }

  // The weights are drawn outside the layout (absolutely placed), so a hover never moves a token.
  // Their bars are BAR_PX a unit of weight where the plot has room beside the tokens, and scaled
  // down together (one scale for every row of this hover) where it has not.
  function fitBars(filled, side) {
    if (!filled.length) return;
    const plotBox = plot.getBoundingClientRect();
    let scale = 1;
    const roomOf = (row) => {
      // The box holds the number and the bars, still 0 px wide: what is left of the plot beside it is theirs.
      const box = row.lastChild.getBoundingClientRect();
      return (side === "left" ? box.right - plotBox.left : plotBox.right - box.left) - box.width;
    };
    for (const { row, found, label, largest } of filled) {
      let room = roomOf(row);
      // A narrow plot keeps the number and drops its "max" (the row's hover card still says it).
      if (plotBox.width > 0 && room < found.length && label.textContent !== largest) {
        label.textContent = largest;
        room = roomOf(row);
      }
      // Every bar is at least 1 px wide; the rest of the room scales with the weights.
      const need = found.reduce((sum, line) => sum + line.weight * BAR_PX, 0);
      if (need > 0) scale = Math.min(scale, Math.max(0, room - found.length) / need);
    }
    for (const { bars, found } of filled) {
      bars.forEach((bar, k) => { bar.style.width = `${Math.max(1, Math.floor(found[k].weight * BAR_PX * scale))}px`; });
    }
  }

  // The row whose lines are drawn alone: the hovered token's, else a generation's selected one.
  const focused = () => hover ?? rowFocus(state);

  function paint() {
    if (!state) return;
    const { attention, visibleHeads, sentenceFilter, sentenceBStart } = state;
    const shown = { visibleHeads, sentenceFilter, sentenceBStart };
    const hover = focused();
    const budget = hover ? null : strongestLinesOf(attention, shown);
    lines = budget ? budget.lines : computeLines(attention, { ...shown, hover });
    const thinned = budget && budget.minWeight > DEFAULT_MIN_WEIGHT;
    note.hidden = !thinned;
    if (thinned) note.textContent = `${thinnedNote(budget, state.weightScale, state.lineMeasure)} ${THINNED_HINT}`;
    const ranges = rangesFor(attention.shape, sentenceBStart, sentenceFilter);
    const rows = Math.max(ranges.from[1] - ranges.from[0], ranges.to[1] - ranges.to[0]);
    linesBox.dataset.lineCount = String(lines.length);
    const colors = headColors(attention.shape[0]);
    tiles.show({
      lines,
      colorOf: (line) => colors[line.head],
      ends: lineEnds(ranges, 0, 0),
      lineWidth: hover ? 2 : 1, // 1px: the fast path
      height: Math.max(rows, 1) * ROW_HEIGHT,
    });
    showWeights();
  }

  return {
    update(next) {
      const layoutChanged = !state || state.tokens !== next.tokens || state.keyTokens !== next.keyTokens
        || state.tokenNotes !== next.tokenNotes || state.keyNotes !== next.keyNotes
        || state.sentenceFilter !== next.sentenceFilter || state.sentenceBStart !== next.sentenceBStart;
      // The same lines as drawn (a trait that changed elsewhere, the kernel's copy of a layer the
      // page held): nothing is drawn again, and a hover stays.
      const sameLines = !layoutChanged && state.attention === next.attention && state.weightScale === next.weightScale
        && String(state.visibleHeads) === String(next.visibleHeads) && rowFocus(state)?.index === rowFocus(next)?.index;
      state = next;
      causalLine.hidden = !next.causal;
      causalLine.textContent = causalNote(next.causalFrom);
      caption.hidden = !next.caption;
      caption.textContent = [next.caption, next.hint].filter(Boolean).join(" ");
      if (layoutChanged) {
        hover = null;
        const ranges = rangesFor(next.attention.shape, next.sentenceBStart, next.sentenceFilter);
        showWeights(); // the rows are kept where the tokens are: a hover's weights go first
        fillColumn(left, "left", ranges.from, next.tokens, next.tokenNotes);
        fillColumn(right, "right", ranges.to, next.keyTokens ?? next.tokens, next.keyTokens ? next.keyNotes ?? [] : next.tokenNotes);
      }
      // Marked only where it moved: 1,000 rows' classes written at every update cost a toggle ~3 ms.
      if (layoutChanged || markedRow !== next.selected) {
        for (const column of [left, right]) {
          for (const row of column.children) {
            const index = Number(row.dataset.index);
            if (layoutChanged || index === markedRow || index === next.selected) row.classList.toggle("attnscope-selected", index === next.selected);
          }
        }
        markedRow = next.selected;
      }
      drawSwatches();
      if (!sameLines) paint();
    },
    lastLines: () => lines,
    /** Brings token row i (of the left column) into view, as little as the scroll allows. */
    scrollToToken(i) {
      [...left.children].find((row) => Number(row.dataset.index) === i)?.scrollIntoView?.({ block: "nearest" });
    },
    /** The view as an image (all the lines it draws without hover): scene, toSvg, toPng. */
    ...imageMethods((options) => {
      if (!state) throw new Error("nothing drawn yet");
      return headScene(state, options);
    }),
    destroy() {
      tiles.destroy();
      root.remove();
    },
  };
}

/** The head view's state on a short run (the open layer's attention), or a status line.
 * @param {import("./view_adapter.js").ViewContext} context */
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
  const runScale = oneScale(get); // weights ÷ the run's largest value: numbers shown unscaled
  return {
    ...(runScale ? { weightScale: runScale.largest || 1, caption: oneScaleNote(runScale), measure: runScale.of,
      lineMeasure: measureOf(runScale) } : {}),
    tokens,
    tokenNotes: get("token_notes"),
    keyTokens: keys,
    keyNotes: get("key_token_notes"),
    causal: Boolean(get("causal")),
    causalFrom: get("causal_from") ?? 0,
    sentenceBStart,
    attention,
    visibleHeads: get("heads"),
    sentenceFilter: sentenceBStart === null ? "all" : get("sentence_filter"),
    selected: get("focus_token") ?? -1, // marked (a head finder's example opens on its query); -1: none
  };
}

// The layers the page holds, their lines worked out while the page is idle for the heads and filter
// shown (what a switch draws), then each head's alone, the open layer's first (what a toggle adds
// up): a view's warm-up restarts at each draw.
const warmUps = new WeakMap(); // view → stop
/** @param {object} view @param {import("./view_adapter.js").ViewContext} context @param {any} shownState */
function warmHeldLayers(view, { get, layerData, aheadLayer }, shownState) {
  warmUps.get(view)?.();
  const { visibleHeads, sentenceFilter, sentenceBStart } = shownState;
  const open = get("layer");
  const held = [shownState.attention];
  // The open layer under the other weighing (a Weigh by switch draws it), when the page holds it.
  const ahead = aheadLayer?.();
  if (ahead && ahead !== shownState.attention) held.push(ahead);
  for (let layer = 0; layer < get("n_layers"); layer++) {
    const attention = layer === open || !layerData ? null : layerData(layer);
    if (attention) held.push(attention);
  }
  warmUps.set(view, warmStrongestLines(held, { visibleHeads, sentenceFilter, sentenceBStart }));
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("head"),
  create(body, { setTraits, ask, page = false }, get) {
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
    // Under the view: knock out a head of this layer, or one of its lines (knockout_control.js).
    const knockout = createKnockoutControl(body, { ask });
    return Object.assign(view, { knockout, updateKnockout: () => knockout.update(knockoutState(get, page)) });
  },
  draw(view, context) {
    view.updateKnockout();
    if (context.get("long_context")) return drawWindow(view, context);
    const state = headState(context);
    const status = followSelected(view, context, shown(view, state));
    if (typeof state === "object") warmHeldLayers(view, context, state);
    return status;
  },
  picture: (context, options) => imaged(context.get("long_context") ? windowState(context) : headState(context), headScene, options),
  title: layerTitle,
  shows: ["generation", "notice", "part", "masked", "change", "weigh", "words", "filter", "heads", "causal", "aside"],
};
