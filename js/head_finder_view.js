// The head finder (attnscope.head_finder in the analysis tab): every head as a point of a scatter
// (any two metrics as axes, a third as colour) beside a sortable table; a filter written as users
// think ("layer >= 6 and sink_rate > 0.5") marks the heads it keeps; a click on a head lists its top
// examples, and a click on an example opens that document in the head view with that head alone.
// The drawing takes data and callbacks, never the widget model.
import { interpolateViridis } from "d3-scale-chromatic";
import { el, pointerIn, sizeCanvas } from "./dom.js";
import { headLabel } from "./labels.js";

const PLOT = 360; // px a side
const PAD = 28;
const RADIUS = 4;
const TABLE_ROWS = 300; // rows drawn at most (a 70B model has 5,120 heads): the strongest first
const FADED = "rgba(140, 140, 140, 0.35)";

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
 * An example's text as DOM: the parts of its document it shows (`spans`, [start, end) positions
 * from the kernel's example_spans: the query in its context, and a far strongest key in its own),
 * "…" where text is left out, the query marked and its strongest key underlined.
 * @param {HTMLElement} parent
 * @param {{pieces: [number, string[]][], n: number}} doc its tokens that some example shows, and how many it has
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
      const span = el(i === query ? "mark" : i === strongest ? "u" : "span", "", parent);
      span.textContent = token.get(i) ?? ""; // token text is data, never markup
      parent.append(" ");
    }
  });
  if (spans.length && spans[spans.length - 1][1] < doc.n) gap();
}

/**
 * @param {HTMLElement} container
 * @param {{onOpenHead?: (layer: number, head: number) => void,
 *          onOpenExample?: (doc: {text: string, text_b: string|null}, layer: number, head: number, query: number) => boolean}} callbacks
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
  let kept = new Set(); // row indices the filter keeps
  let selected = null; // row index
  let sort = { key: "label", down: false };
  const ui = { x: null, y: null, color: null, filter: "" };
  let screen = new Float32Array(0);

  function options(select, keys, value) {
    if (select.options.length !== keys.length || [...select.options].some((o, i) => o.value !== keys[i])) {
      select.replaceChildren(...keys.map((k) => { const o = document.createElement("option"); o.value = k; o.textContent = k; return o; }));
    }
    select.value = value;
  }

  function applyFilter() {
    const names = ["layer", "head", ...state.measures.map((m) => m.key)];
    try {
      const keep = compileFilter(ui.filter, names);
      kept = new Set(rows.flatMap((row, i) => (keep(row) ? [i] : [])));
      problem.hidden = true;
    } catch (error) {
      problem.textContent = error.message;
      problem.hidden = false;
      kept = new Set(rows.keys());
    }
    count.textContent = `${kept.size.toLocaleString("en")} of ${rows.length.toLocaleString("en")} heads`;
  }

  function drawScatter() {
    const ctx = sizeCanvas(canvas, PLOT, PLOT);
    screen = new Float32Array(2 * rows.length);
    if (!ctx) return;
    const range = (key) => {
      const values = rows.map((r) => r[key]).filter(Number.isFinite);
      const lo = Math.min(...values);
      const hi = Math.max(...values);
      return [lo, hi > lo ? hi : lo + 1];
    };
    const [[x0, x1], [y0, y1], [c0, c1]] = [range(ui.x), range(ui.y), range(ui.color)];
    ctx.clearRect(0, 0, PLOT, PLOT);
    ctx.fillStyle = "currentColor";
    ctx.font = "10px sans-serif";
    ctx.fillStyle = getComputedStyle(root).color || "#333";
    ctx.fillText(`${ui.x} →`, PLOT / 2 - 20, PLOT - 6);
    ctx.save();
    ctx.translate(10, PLOT / 2 + 20);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(`${ui.y} →`, 0, 0);
    ctx.restore();
    ctx.fillText(`${x0.toPrecision(2)}`, PAD, PLOT - 6);
    ctx.fillText(`${x1.toPrecision(2)}`, PLOT - PAD - 16, PLOT - 6);
    ctx.fillText(`${y1.toPrecision(2)}`, 14, PAD);
    ctx.fillText(`${y0.toPrecision(2)}`, 14, PLOT - PAD);
    const order = [...rows.keys()].sort((a, b) => Number(kept.has(a)) - Number(kept.has(b))); // kept drawn last, on top
    for (const i of order) {
      const row = rows[i];
      const x = PAD + ((row[ui.x] - x0) / (x1 - x0)) * (PLOT - 2 * PAD);
      const y = PLOT - PAD - ((row[ui.y] - y0) / (y1 - y0)) * (PLOT - 2 * PAD);
      screen[2 * i] = x;
      screen[2 * i + 1] = y;
      if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
      ctx.beginPath();
      ctx.arc(x, y, kept.has(i) ? RADIUS : RADIUS - 1.5, 0, 2 * Math.PI);
      // Viridis from its second fifth: its darkest purples vanish on a dark theme's background.
      ctx.fillStyle = kept.has(i) ? interpolateViridis(0.2 + 0.8 * ((row[ui.color] - c0) / (c1 - c0) || 0)) : FADED;
      ctx.fill();
      if (i === selected) {
        ctx.lineWidth = 2;
        ctx.strokeStyle = "#d62728";
        ctx.stroke();
      }
    }
    canvas.dataset.kept = String(kept.size);
  }

  function drawTable() {
    const keys = ["label", ui.x, ui.y, ui.color].filter((k, i, all) => all.indexOf(k) === i);
    const table = el("table", "");
    const head = el("tr", "", el("thead", "", table));
    for (const key of keys) {
      const th = el("th", "", head);
      th.textContent = key + (sort.key === key ? (sort.down ? " ↓" : " ↑") : "");
      th.tabIndex = 0;
      const resort = () => { sort = { key, down: sort.key === key ? !sort.down : key !== "label" }; drawTable(); };
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
      for (const key of keys) {
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

  function choose(i) {
    selected = i;
    drawScatter();
    drawTable();
    drawExamples();
    tableBox.querySelector(`tr[data-head="${rows[i].label}"]`)?.focus?.();
  }

  function redraw() {
    applyFilter();
    drawScatter();
    drawTable();
    drawExamples();
  }

  canvas.addEventListener("click", (event) => {
    const [px, py] = pointerIn(canvas, event);
    let best = -1;
    let bestD = 64;
    for (let i = 0; i < rows.length; i++) {
      const d = (screen[2 * i] - px) ** 2 + (screen[2 * i + 1] - py) ** 2;
      if (d < bestD) { best = i; bestD = d; }
    }
    if (best >= 0) choose(best);
  });
  for (const [select, key] of [[xSelect, "x"], [ySelect, "y"], [colorSelect, "color"]]) {
    select.addEventListener("change", () => { ui[key] = select.value; redraw(); });
  }
  filterInput.addEventListener("input", () => { ui.filter = filterInput.value; redraw(); });

  return {
    /** state: {nLayers, nHeads, measures: [{key, values}], finder: {examples, docs}} */
    update(next) {
      const same = state && next.measures === state.measures;
      state = next;
      if (!same) {
        rows = headRows(next);
        const keys = next.measures.map((m) => m.key);
        const fallback = (want, i) => (keys.includes(want) ? want : keys[Math.min(i, keys.length - 1)]);
        ui.x = keys.includes(ui.x) ? ui.x : fallback("entropy", 0);
        ui.y = keys.includes(ui.y) ? ui.y : fallback("sink_rate", 1);
        ui.color = keys.includes(ui.color) ? ui.color : fallback("prev_token", 2);
        if (selected !== null && selected >= rows.length) selected = null;
        options(xSelect, keys, ui.x);
        options(ySelect, keys, ui.y);
        options(colorSelect, keys, ui.color);
      }
      redraw();
    },
    /** The metric the points are coloured by (a picture draws it as a layer × head map). */
    colorMetric: () => ui.color,
    /** Sets the filter as if typed (tests, and the kernel's `find` shown in the view). */
    filter(text) {
      filterInput.value = text;
      ui.filter = text;
      redraw();
      return kept.size;
    },
    destroy() { root.remove(); },
  };
}
