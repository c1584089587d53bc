// The head finder (attnscope.head_finder in the analysis tab): every head as a point of a scatter
// (any two metrics as axes, a third as colour) beside a sortable table; a filter written as users
// think ("layer >= 6 and sink_rate > 0.5") marks the heads it keeps; a click on a head lists its top
// examples, and a click on an example opens that document in the head view with that head alone.
// The scatter is one scene (finder_plot.js finderPlot) for the screen's canvas and for the images and the
// kernel's picture; the reader's choice (axes, colour, filter, head) is the widget's
// `analysis_choice`, written through a callback. The drawing takes data and callbacks, never the
// widget model.
import { el, pointerIn, sizeCanvas } from "../drawing/dom.js";
import { drawScene, imageMethods } from "../drawing/scene.js";
import { cellText, finderChoice, finderPlot, headRows, tableColumns } from "./finder_plot.js";
import { nearestPoint } from "./head_scatter_view.js";

/** @typedef {import("./finder_plot.js").FinderChoice} FinderChoice */

const HIT = 8; // px from a point that a click still picks it
const TABLE_ROWS = 300; // rows drawn at most (a 70B model has 5,120 heads): the strongest first

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
 * analysis_choice (finderChoice reads it); a state without one keeps the view's own.
 * @param {HTMLElement} container
 * @param {{onOpenHead?: (layer: number, head: number) => void,
 *          onOpenExample?: (doc: {text: string, text_b: string|null}, layer: number, head: number, query: number) => boolean,
 *          onChoice?: (choice: FinderChoice) => void}} callbacks
 *   onChoice: the reader changed the axes, the colour, the filter or the head (the widget keeps it as analysis_choice)
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
  let choice = {}; // analysis_choice as last given, or as the reader made it since
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
    const columns = tableColumns(ui);
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
        td.textContent = cellText(rows[i], key);
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
