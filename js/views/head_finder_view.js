// The head finder (attnscope.head_finder in the analysis tab): every head as a point of a scatter
// (any two metrics as axes, a third as colour) beside a sortable table; a filter written as users
// think ("layer >= 6 and sink_rate > 0.5") marks the heads it keeps; a click on a head lists its top
// examples, and a click on an example opens that document in the head view with that head alone.
// The scatter is one scene (finderPlot) for the screen's canvas and for the images and the
// kernel's picture; the reader's choice (axes, colour, filter, head) is the widget's
// `finder_choice`, written through a callback. The drawing takes data and callbacks, never the
// widget model.
import { interpolateViridis } from "d3-scale-chromatic";
import { el, pointerIn, sizeCanvas } from "../drawing/dom.js";
import { nearestPoint } from "./head_scatter_view.js";
import { headLabel } from "../drawing/labels.js";
import { BAR_HEIGHT, colorBar, colorBarScene, formatTick } from "../drawing/legend.js";
import { createScene, drawScene, imageMethods } from "../drawing/scene.js";
import { wrapText } from "../drawing/svg.js";

const PLOT = 300; // px a side of the plot's box
const INSET = 8; // px between the box and the outermost points
const LEFT = 50; // px left of the box: the y axis's name and ticks
const RIGHT = 14;
const RADIUS = 4;
const HIT = 8; // px from a point that a click still picks it
const TABLE_ROWS = 300; // rows drawn at most (a 70B model has 5,120 heads): the strongest first
const FADED = "rgba(140, 140, 140, 0.35)";
const AXIS = "#888";
const RING = "#d62728";
// What the plot shows while nothing else is chosen (an empty finder_choice), each where the
// finder has it.
export const DEFAULT_CHOICE = { x: "entropy", y: "sink_rate", color: "prev_token" };

/**
 * A filter as users write it, the grammar of the kernel's (analyses/head_finder.py): comparisons of
 * metric names and numbers (<, <=, >, >=, ==, !=, chained as in Python), joined by and / or / not and
 * parentheses. → (row) => boolean, row: name → number. Anything else throws an Error saying what.
 * @param {string} text
 * @param {string[]} names
 */
export function compileFilter(text, names) {
  const tokens = text.match(/\s*(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|[A-Za-z_][A-Za-z_0-9]*|<=|>=|==|!=|<|>|\(|\)|-|\S)/g) ?? [];
  const items = tokens.map((t) => t.trim());
  let at = 0;
  const peek = () => items[at];
  const fail = (why) => { throw new Error(`The filter "${text}" ${why}`); };
  const COMPARE = { "<": (a, b) => a < b, "<=": (a, b) => a <= b, ">": (a, b) => a > b, ">=": (a, b) => a >= b,
    "==": (a, b) => a === b, "!=": (a, b) => a !== b };
  function atom() {
    const t = items[at++];
    if (t === undefined) fail("ends too soon: does it read as a condition?");
    if (t === "(") {
      const inner = or();
      if (items[at++] !== ")") fail("misses a closing parenthesis.");
      return inner;
    }
    if (t === "-" && /^[\d.]/.test(peek() ?? "")) {
      const value = -Number(items[at++]);
      return () => value;
    }
    if (/^[\d.]/.test(t)) {
      const value = Number(t);
      if (Number.isNaN(value)) fail(`has ${t}, which is no number.`);
      return () => value;
    }
    if (/^[A-Za-z_]/.test(t)) {
      if (["and", "or", "not"].includes(t)) fail(`has "${t}" where a metric or a number goes.`);
      if (!names.includes(t)) fail(`names ${t}, which is no metric: use ${names.join(", ")}.`);
      return (row) => row[t];
    }
    return fail(`may only compare metrics with numbers (and, or, not, parentheses), not "${t}".`);
  }
  function comparison() {
    const parts = [atom()];
    const ops = [];
    while (peek() in COMPARE) {
      ops.push(COMPARE[items[at++]]);
      parts.push(atom());
    }
    if (!ops.length) return parts[0];
    return (row) => ops.every((op, i) => op(parts[i](row), parts[i + 1](row)));
  }
  function not() {
    if (peek() === "not") {
      at++;
      const inner = not();
      return (row) => !inner(row);
    }
    return comparison();
  }
  function and() {
    const parts = [not()];
    while (peek() === "and") { at++; parts.push(not()); }
    return parts.length === 1 ? parts[0] : (row) => parts.every((p) => Boolean(p(row)));
  }
  function or() {
    const parts = [and()];
    while (peek() === "or") { at++; parts.push(and()); }
    return parts.length === 1 ? parts[0] : (row) => parts.some((p) => Boolean(p(row)));
  }
  if (!items.length) return () => true;
  const test = or();
  if (at < items.length) fail(`does not read as a condition past "${items.slice(0, at).join(" ")}".`);
  return (row) => Boolean(test(row));
}

/** Every head as a row: layer, head, label and each metric. */
export function headRows(state) {
  const { nLayers, nHeads, measures } = state;
  const rows = [];
  for (let layer = 0; layer < nLayers; layer++) {
    for (let head = 0; head < nHeads; head++) {
      const row = { layer, head, label: headLabel(layer, head) };
      for (const m of measures) row[m.key] = m.values[layer * nHeads + head];
      rows.push(row);
    }
  }
  return rows;
}

/**
 * finder_choice: what the reader chose of the plot, each part optional.
 * @typedef {{x?: string, y?: string, color?: string, filter?: string, head?: string | null}} FinderChoice
 */

/**
 * The plot's choice, each part where the finder has it: x, y and color name metrics (those of
 * `choice` that name one of `keys`, else DEFAULT_CHOICE's, else the first metrics), filter a
 * string ("": every head) and head a head's label ("2-5") or null. `choice` is finder_choice as
 * the widget holds it ({}: the defaults).
 * @param {string[]} keys
 * @param {FinderChoice | null} [choice]
 */
export function finderChoice(keys, choice = {}) {
  const given = choice ?? {};
  const pick = (axis, i) => {
    if (keys.includes(given[axis])) return given[axis];
    return keys.includes(DEFAULT_CHOICE[axis]) ? DEFAULT_CHOICE[axis] : keys[Math.min(i, keys.length - 1)];
  };
  return { x: pick("x", 0), y: pick("y", 1), color: pick("color", 2),
    filter: typeof given.filter === "string" ? given.filter : "", head: typeof given.head === "string" ? given.head : null };
}

/** The heads a filter keeps: {kept: Set of row indices, problem: "", or why the filter does not
 * read (then it keeps every head)}. */
export function keptHeads(rows, keys, filter) {
  try {
    const keep = compileFilter(filter, ["layer", "head", ...keys]);
    return { kept: new Set(rows.flatMap((row, i) => (keep(row) ? [i] : []))), problem: "" };
  } catch (error) {
    return { kept: new Set(rows.keys()), problem: error.message };
  }
}

/** [lo, hi] of a metric's finite values, hi > lo ([0, 1] where there are none). */
function extent(rows, key) {
  let [lo, hi] = [Infinity, -Infinity];
  for (const row of rows) {
    const v = row[key];
    if (Number.isFinite(v)) [lo, hi] = [Math.min(lo, v), Math.max(hi, v)];
  }
  if (lo > hi) return [0, 1];
  return [lo, hi > lo ? hi : lo + 1];
}

// Viridis from its second fifth: its darkest purples vanish on a dark theme's background.
const pointColor = (t) => interpolateViridis(0.2 + 0.8 * t);

/**
 * The finder's scatter as one scene, for the screen's canvas (labels: false) and for images and
 * the kernel's picture (labels: the title, and under it what the filter keeps): each head a point
 * at its x and y metrics; the heads the filter keeps in viridis by the colour metric, drawn over
 * those it drops (faded, smaller); the chosen head ringed; the axes named, their ends in numbers;
 * under them a colour bar of the colour metric. maxPoints (a picture's thinning): at most that
 * many points, the dropped heads left out first, then the kept heads of the smallest colour
 * values, as the picture says. state: {nLayers, nHeads, measures: [{key, values}]}; choice:
 * finderChoice's.
 * → {scene, xy: Float32Array(2 · heads), each head's point in scene px (NaN where none is drawn),
 *    kept: Set of row indices, problem: "" or why the filter does not read}
 */
export function finderPlot(state, choice, { title = "", labels = true, maxPoints = Infinity, rows = headRows(state) } = {}) {
  const keys = state.measures.map((m) => m.key);
  const { kept, problem } = keptHeads(rows, keys, choice.filter);
  const [[x0, x1], [y0, y1], [c0, c1]] = [extent(rows, choice.x), extent(rows, choice.y), extent(rows, choice.color)];
  const selected = rows.findIndex((row) => row.label === choice.head);
  const placed = [...rows.keys()].filter((i) => Number.isFinite(rows[i][choice.x]) && Number.isFinite(rows[i][choice.y]));
  let faded = placed.filter((i) => !kept.has(i));
  let shown = placed.filter((i) => kept.has(i));
  const notes = [];
  if (choice.filter.trim()) {
    notes.push(problem ? `${problem} Every head is drawn.`
      : `The filter “${choice.filter}” keeps ${kept.size.toLocaleString("en")} of ${rows.length.toLocaleString("en")} heads; the others are faded.`);
  }
  if (faded.length + shown.length > maxPoints && faded.length) {
    notes.push(`The ${faded.length.toLocaleString("en")} heads it drops are not drawn here.`);
    faded = [];
  }
  if (shown.length > maxPoints) {
    const colour = (i) => (Number.isNaN(rows[i][choice.color]) ? -Infinity : rows[i][choice.color]);
    const strongest = new Set([...shown].sort((a, b) => colour(b) - colour(a)).slice(0, maxPoints));
    notes.push(`Of the ${shown.length.toLocaleString("en")} heads kept, the ${maxPoints.toLocaleString("en")} of the largest ${choice.color} are drawn.`);
    shown = shown.filter((i) => strongest.has(i) || i === selected);
  }
  if (selected >= 0 && placed.includes(selected) && ![...faded, ...shown].includes(selected)) {
    (kept.has(selected) ? shown : faded).push(selected);
  }
  if (selected >= 0) notes.push(`Head ${choice.head} is ringed.`);

  const width = LEFT + PLOT + RIGHT;
  const lines = labels ? notes.flatMap((note) => wrapText(note, width - 12, 11)) : [];
  const top = labels ? 30 + lines.length * 15 : 8;
  const bottom = top + PLOT;
  const s = createScene(width, bottom + 36 + BAR_HEIGHT + 4, { background: labels });
  if (labels) {
    s.text(6, 12, title, { role: "title" });
    lines.forEach((line, i) => { s.text(6, 28 + i * 15, line, { size: 11, role: "subtitle" }); });
  }
  // The axes: a line each, their ends in numbers, their metrics named.
  const px = (v) => LEFT + INSET + ((v - x0) / (x1 - x0)) * (PLOT - 2 * INSET);
  const py = (v) => bottom - INSET - ((v - y0) / (y1 - y0)) * (PLOT - 2 * INSET);
  s.segment(LEFT, top, LEFT, bottom, AXIS);
  s.segment(LEFT, bottom, LEFT + PLOT, bottom, AXIS);
  for (const v of [x0, x1]) {
    s.segment(px(v), bottom, px(v), bottom + 3, AXIS);
    s.text(px(v), bottom + 11, formatTick(v, 2), { anchor: "middle", size: 10, role: "tick" });
  }
  for (const v of [y0, y1]) {
    s.segment(LEFT - 3, py(v), LEFT, py(v), AXIS);
    s.text(LEFT - 5, py(v), formatTick(v, 2), { anchor: "end", size: 10, role: "tick" });
  }
  s.text(LEFT + PLOT / 2, bottom + 25, choice.x, { anchor: "middle", size: 11, role: "axis" });
  s.text(9, top + PLOT / 2, choice.y, { anchor: "middle", size: 11, rotate: -90, role: "axis" });
  colorBarScene(s, LEFT, bottom + 36, colorBar(`colour: ${choice.color}`, c0, c1, pointColor));
  // The points: the dropped heads first, the kept ones over them, the chosen head's ring on top.
  const xy = new Float32Array(2 * rows.length).fill(NaN);
  const at = (i) => {
    xy[2 * i] = px(rows[i][choice.x]);
    xy[2 * i + 1] = py(rows[i][choice.y]);
    return [xy[2 * i], xy[2 * i + 1]];
  };
  for (const i of faded) s.circle(...at(i), RADIUS - 1.5, FADED, "faded");
  const shade = (v) => Math.min(1, Math.max(0, (v - c0) / (c1 - c0) || 0)); // ±∞ at an end, NaN at the start
  for (const i of shown) s.circle(...at(i), RADIUS, pointColor(shade(rows[i][choice.color])), "point");
  if (selected >= 0 && Number.isFinite(xy[2 * selected])) {
    s.circle(xy[2 * selected], xy[2 * selected + 1], RADIUS + 2.5, "none", "selected", { stroke: RING, strokeWidth: 2 });
  }
  return { scene: s.scene, xy, kept, problem };
}

/** The finder's picture (analysis_view.js): finderPlot of the state's own choice (finder_choice). */
export function finderScene(state, options = {}) {
  return finderPlot(state, finderChoice(state.measures.map((m) => m.key), state.choice), options).scene;
}

/**
 * An example's text as DOM: the parts of its document it shows (`spans`, [start, end) positions
 * from the kernel's example_spans: the query in its context, and a far strongest key in its own),
 * "…" where text is left out, the query marked and its strongest key underlined. With `running`,
 * each piece is what its token adds to the text as it reads (its spaces before it, no "##"):
 * "hikers", not "hike ##rs"; otherwise the tokens are set apart by spaces.
 * @param {HTMLElement} parent
 * @param {{pieces: [number, string[]][], n: number, running?: boolean}} doc its tokens (or running
 *   pieces) that some example shows, and how many it has
 */
function exampleText(parent, doc, spans, query, strongest) {
  const token = new Map();
  for (const [start, tokens] of doc.pieces) {
    for (const [i, t] of tokens.entries()) token.set(start + i, t);
  }
  const gap = () => parent.append("… ");
  if (spans[0]?.[0] > 0) gap();
  spans.forEach(([start, end], k) => {
    if (k) gap();
    for (let i = start; i < end; i++) {
      const text = token.get(i) ?? "";
      if (doc.running && /^\s/.test(text)) parent.append(" ");
      const span = el(i === query ? "mark" : i === strongest ? "u" : "span", "", parent);
      span.textContent = doc.running ? text.trim() : text; // token text is data, never markup
      if (!doc.running || /\s$/.test(text)) parent.append(" ");
    }
  });
  if (spans.length && spans[spans.length - 1][1] < doc.n) gap();
}

/**
 * createHeadFinderView(container, callbacks) → {update(state), filter(text), scene, toSvg, toPng, destroy}
 * state: {nLayers, nHeads, measures: [{key, values}], finder: {examples, docs}, choice}: choice is
 * finder_choice (finderChoice reads it); a state without one keeps the view's own.
 * @param {HTMLElement} container
 * @param {{onOpenHead?: (layer: number, head: number) => void,
 *          onOpenExample?: (doc: {text: string, text_b: string|null}, layer: number, head: number, query: number) => boolean,
 *          onChoice?: (choice: FinderChoice) => void}} callbacks
 *   onChoice: the reader changed the axes, the colour, the filter or the head (the widget keeps it as finder_choice)
 */
export function createHeadFinderView(container, callbacks = {}) {
  const root = el("div", "attnscope-finder", container);
  const bar = el("div", "attnscope-finder-bar", root);
  const pick = (label) => {
    const box = el("label", "attnscope-control", bar);
    el("span", "", box).textContent = label;
    return el("select", "", box);
  };
  const [xSelect, ySelect, colorSelect] = [pick("x"), pick("y"), pick("colour")];
  const filterBox = el("label", "attnscope-control", bar);
  el("span", "", filterBox).textContent = "filter";
  const filterInput = el("input", "attnscope-finder-filter", filterBox);
  filterInput.type = "text";
  filterInput.placeholder = "layer >= 3 and sink_rate > 0.5";
  filterInput.size = 34;
  const count = el("span", "attnscope-hint", bar);
  const problem = el("div", "attnscope-finder-problem", root); // not .attnscope-error: that is the widget's one error line
  problem.hidden = true;
  const panes = el("div", "attnscope-finder-panes", root);
  const canvas = el("canvas", "attnscope-finder-scatter", panes);
  const tableBox = el("div", "attnscope-finder-table", panes);
  const examplesBox = el("div", "attnscope-finder-examples", root);

  let state = null;
  let rows = [];
  let keys = [];
  /** @type {FinderChoice} */
  let choice = {}; // finder_choice as last given, or as the reader made it since
  let ui = finderChoice([], {}); // choice with its defaults
  let plot = null; // what the canvas shows: its points where the scene put them
  let kept = new Set(); // row indices the filter keeps
  let selected = null; // row index
  let sort = { key: "label", down: false };
  let drawn = null; // what the drawing was made from

  function options(select, values, value) {
    if (select.options.length !== values.length || [...select.options].some((o, i) => o.value !== values[i])) {
      select.replaceChildren(...values.map((k) => { const o = document.createElement("option"); o.value = k; o.textContent = k; return o; }));
    }
    select.value = value;
  }

  const dark = () => root.closest(".attnscope-dark") !== null;

  function drawScatter() {
    plot = finderPlot(state, ui, { labels: false, rows });
    kept = plot.kept;
    problem.textContent = plot.problem;
    problem.hidden = !plot.problem;
    count.textContent = `${kept.size.toLocaleString("en")} of ${rows.length.toLocaleString("en")} heads`;
    const ctx = sizeCanvas(canvas, plot.scene.width, plot.scene.height);
    // The axes' and the colour bar's text is drawn on the canvas: it follows the widget's theme.
    if (ctx) drawScene(ctx, plot.scene, { dark: dark() });
    canvas.setAttribute("aria-label", `Heads by ${ui.x} (across) and ${ui.y} (up), coloured by ${ui.color}`);
    Object.assign(canvas.dataset, { kept: String(kept.size), x: ui.x, y: ui.y, color: ui.color });
    canvas.dataset.positions = Array.from(plot.xy, (v) => (Number.isFinite(v) ? v.toFixed(1) : "")).join(","); // x,y of each head's point
  }

  function drawTable() {
    const columns = ["label", ui.x, ui.y, ui.color].filter((k, i, all) => all.indexOf(k) === i);
    const table = el("table", "");
    const head = el("tr", "", el("thead", "", table));
    for (const key of columns) {
      const th = el("th", "", head);
      th.textContent = key + (sort.key === key ? (sort.down ? " ↓" : " ↑") : "");
      th.tabIndex = 0;
      th.dataset.key = key;
      const resort = () => {
        sort = { key, down: sort.key === key ? !sort.down : key !== "label" };
        drawTable();
        // The table is drawn anew: focus stays on this column's header (a keyboard user sorts again or moves on).
        [...tableBox.querySelectorAll("th")].find((cell) => cell.dataset.key === key)?.focus();
      };
      th.addEventListener("click", resort);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") resort(); });
    }
    const body = el("tbody", "", table);
    const value = (i) => (sort.key === "label" ? rows[i].layer * 1e6 + rows[i].head : rows[i][sort.key]);
    const shown = [...kept].sort((a, b) => (sort.down ? value(b) - value(a) : value(a) - value(b))).slice(0, TABLE_ROWS);
    const focusable = shown.includes(selected) ? selected : shown[0];
    for (const i of shown) {
      const tr = el("tr", i === selected ? "attnscope-selected" : "", body);
      tr.tabIndex = i === focusable ? 0 : -1; // one tab stop; the arrows move through the rows
      tr.dataset.head = rows[i].label;
      for (const key of columns) {
        const td = el("td", "", tr);
        td.textContent = key === "label" ? rows[i].label : Number.isFinite(rows[i][key]) ? rows[i][key].toFixed(3) : "–";
      }
      tr.addEventListener("click", () => choose(i));
      tr.addEventListener("dblclick", () => callbacks.onOpenHead?.(rows[i].layer, rows[i].head));
      tr.addEventListener("keydown", (e) => {
        if (e.key === "Enter") choose(i);
        if (e.key === "ArrowDown") tr.nextElementSibling?.focus();
        if (e.key === "ArrowUp") tr.previousElementSibling?.focus();
      });
    }
    tableBox.replaceChildren(table);
    if (kept.size > TABLE_ROWS) el("div", "attnscope-hint", tableBox).textContent = `The first ${TABLE_ROWS} of ${kept.size} by this order.`;
  }

  function drawExamples() {
    examplesBox.replaceChildren();
    if (selected === null) {
      el("div", "attnscope-hint", examplesBox).textContent = "Click a head (a point or a row) to list the texts where it fires.";
      return;
    }
    const { layer, head, label } = rows[selected];
    const title = el("div", "attnscope-finder-title", examplesBox);
    title.textContent = `Where head ${label} fires: its largest weight on an ordinary token, strongest first. `;
    const open = el("button", "attnscope-finder-open", title);
    open.type = "button";
    open.textContent = "Open this head";
    open.addEventListener("click", () => callbacks.onOpenHead?.(layer, head));
    const list = state.finder.examples[`${layer}-${head}`] ?? [];
    if (!list.length) el("div", "attnscope-hint", examplesBox).textContent = "No example kept for this head.";
    for (const [k, [doc, query, score, keys, spans]] of list.entries()) {
      const saved = state.finder.docs[String(doc)];
      const item = el("div", "attnscope-finder-example", examplesBox);
      item.tabIndex = k === 0 ? 0 : -1; // one tab stop; the arrows move through the examples
      item.dataset.doc = String(doc);
      el("span", "attnscope-finder-score", item).textContent = `${score.toFixed(2)} · text ${doc}: `;
      exampleText(item, saved, spans, query, keys[0]?.[0]);
      const go = () => {
        const opened = callbacks.onOpenExample?.({ text: saved.text, text_b: saved.text_b }, layer, head, query);
        if (opened === false) {
          problem.textContent = "Opening a text reruns the model: this saved copy has none. Run the notebook to open it.";
          problem.hidden = false;
        }
      };
      item.addEventListener("click", go);
      item.addEventListener("keydown", (e) => {
        if (e.key === "Enter") go();
        if (e.key === "ArrowDown") item.nextElementSibling?.focus();
        if (e.key === "ArrowUp") item.previousElementSibling?.focus();
      });
    }
  }

  /** Everything from the state and the choice. */
  function redraw() {
    ui = finderChoice(keys, choice);
    const index = rows.findIndex((row) => row.label === ui.head);
    selected = index >= 0 ? index : null;
    options(xSelect, keys, ui.x);
    options(ySelect, keys, ui.y);
    options(colorSelect, keys, ui.color);
    if (filterInput.value !== ui.filter) filterInput.value = ui.filter;
    drawScatter();
    drawTable();
    drawExamples();
    drawn = { measures: state.measures, finder: state.finder, choice: JSON.stringify(choice), dark: dark() };
  }

  /** The reader's change of the plot: drawn at once, and handed on (the widget keeps it). */
  function change(part) {
    choice = { ...ui, ...part };
    callbacks.onChoice?.(choice);
    redraw();
  }

  function choose(i) {
    change({ head: rows[i].label });
    tableBox.querySelector(`tr[data-head="${rows[i].label}"]`)?.focus?.();
  }

  canvas.addEventListener("click", (event) => {
    if (!plot) return;
    const [px, py] = pointerIn(canvas, event);
    const best = nearestPoint(px, py, plot.xy, HIT); // where the scene drew each point
    if (best >= 0) choose(best);
  });
  for (const [select, key] of [[xSelect, "x"], [ySelect, "y"], [colorSelect, "color"]]) {
    select.addEventListener("change", () => change({ [key]: select.value }));
  }
  filterInput.addEventListener("input", () => change({ filter: filterInput.value }));

  return {
    update(next) {
      if (!state || next.measures !== state.measures) {
        rows = headRows(next);
        keys = next.measures.map((m) => m.key);
      }
      state = next;
      choice = next.choice ?? choice;
      const same = drawn && drawn.measures === next.measures && drawn.finder === next.finder
        && drawn.choice === JSON.stringify(choice) && drawn.dark === dark();
      if (!same) redraw(); // a redrawn table would lose the focus the keyboard moves
    },
    /** Sets the filter as if typed (tests, and the kernel's `find` shown in the view); → the heads it keeps. */
    filter(text) {
      filterInput.value = text;
      change({ filter: text });
      return kept.size;
    },
    ...imageMethods(({ title = "" } = {}) => {
      if (!state) throw new Error("nothing drawn yet");
      return finderPlot(state, ui, { title, rows }).scene;
    }),
    destroy() { root.remove(); },
  };
}
