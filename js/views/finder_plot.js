// The head finder's plot as data, no DOM: the reader's choice (analysis_choice), the filter's grammar
// (the kernel's too: analyses/finder_filter.py), the heads it keeps, and the scatter's one scene
// (finderPlot), drawn on the screen's canvas, in the SVG and PNG images and in the kernel's picture.
// An image has no table beside it and nothing to hover: its scene names the strongest heads' dots
// and lists them with their numbers, as the screen's table does (head_finder_view.js).
import { interpolateViridis } from "d3-scale-chromatic";
import { headLabel } from "../drawing/labels.js";
import { BAR_HEIGHT, colorBar, colorBarScene, formatTick } from "../drawing/legend.js";
import { createScene } from "../drawing/scene.js";
import { textWidth, wrapText } from "../drawing/svg.js";

const PLOT = 300; // px a side of the plot's box
const INSET = 8; // px between the box and the outermost points
const LEFT = 50; // px left of the box: the y axis's name and ticks
const RIGHT = 14;
const RADIUS = 4;
const FADED = "rgba(140, 140, 140, 0.35)";
const AXIS = "#888";
const RING = "#d62728";
const RING_RADIUS = RADIUS + 2.5;
// An image names this many kept heads at their points and lists them beside the plot, the
// largest of the colour metric first (the chosen head too, where it is not among them): the
// screen's table lists every head, and its points answer a hover; an image has neither.
export const LISTED = 12;
const GAP = 18; // px between the plot and its list
const LIST_SIZE = 10; // px, the list's font
const LIST_PITCH = 14; // px a row of the list takes
const NAME_SIZE = 9; // px, a point's name

/** The columns of the finder's table, on the screen and in an image: the head, then each metric the plot shows. */
export const tableColumns = (choice) => ["label", choice.x, choice.y, choice.color].filter((k, i, all) => all.indexOf(k) === i);

/** A cell of the finder's table as both tables write it: the head's label, or the metric to 3 decimals. */
export const cellText = (row, key) => (key === "label" ? row.label : Number.isFinite(row[key]) ? row[key].toFixed(3) : "–");
// What the plot shows while nothing else is chosen (an empty analysis_choice), each where the
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
 * analysis_choice: what the reader chose of the plot, each part optional.
 * @typedef {{x?: string, y?: string, color?: string, filter?: string, head?: string | null}} FinderChoice
 */

/**
 * The plot's choice, each part where the finder has it: x, y and color name metrics (those of
 * `choice` that name one of `keys`, else DEFAULT_CHOICE's, else the first metrics), filter a
 * string ("": every head) and head a head's label ("2-5") or null. `choice` is analysis_choice as
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

/** An axis's [lo, hi]: extent's, from 0 where every value is ≥ 0 and the smallest is under a
 * quarter of the largest: a share's axis starting at its smallest value (4.5e-9 in the corner)
 * read as if that were 0, and drew 70 heads in a heap there. */
function axisRange(rows, key) {
  const [lo, hi] = extent(rows, key);
  return lo >= 0 && lo < hi / 4 ? [0, hi] : [lo, hi];
}

// Viridis from its second fifth: its darkest purples vanish on a dark theme's background.
const pointColor = (t) => interpolateViridis(0.2 + 0.8 * t);

/**
 * The heads an image names and lists: the kept heads drawn, the largest `color` first (NaN
 * last), at most LISTED of them (`strongest`), then the chosen head where it is drawn and not
 * among them. → {listed: row indices, strongest: how many of them are the largest}.
 */
export function listedHeads(rows, drawn, kept, color, selected) {
  const value = (i) => (Number.isNaN(rows[i][color]) ? -Infinity : rows[i][color]);
  const listed = drawn.filter((i) => kept.has(i)).sort((a, b) => value(b) - value(a)).slice(0, LISTED);
  const strongest = listed.length;
  if (selected >= 0 && drawn.includes(selected) && !listed.includes(selected)) listed.push(selected);
  return { listed, strongest };
}

// Where a point's name may go, tried in turn: right, left, above, below, then the corners; beside
// the point, then farther out with a leader line to it.
/** @type {Array<[number, number, string]>} */
const NAME_PLACES = [[1, 0, "start"], [-1, 0, "end"], [0, -1, "middle"], [0, 1, "middle"],
  [1, -1, "start"], [-1, -1, "end"], [1, 1, "start"], [-1, 1, "end"]];
const NAME_DISTANCES = [1, 3];
const LEADER = "#999";

/**
 * Names ("2-5") of the points of `listed`, each where it covers no point drawn (`drawn`, the
 * ringed `selected`'s ring included) but its own and no name placed before it, inside `box`
 * {x0, y0, x1, y1}: beside its point, else farther out with a leader line; the strongest are placed
 * first. at(i) → [x, y] of head i's point.
 * → [{i, x, y, anchor, leader: [x0, y0, x1, y1] | null}] (a name with no room is left out).
 */
export function placeNames(rows, listed, drawn, at, box, selected = -1) {
  const reach = (i) => (i === selected ? RING_RADIUS + 1 : RADIUS); // the ringed point's ring is its edge
  const taken = drawn.map((i) => {
    const [x, y] = at(i);
    return { i, x0: x - reach(i), y0: y - reach(i), x1: x + reach(i), y1: y + reach(i) };
  });
  const names = [];
  const half = NAME_SIZE / 2 + 1;
  for (const i of listed) {
    const [x, y] = at(i);
    const width = textWidth(rows[i].label, NAME_SIZE);
    const place = NAME_DISTANCES.flatMap((far) => NAME_PLACES.map(([dx, dy, anchor]) => {
      const nx = x + dx * (reach(i) + 2) * far;
      const ny = y + dy * (reach(i) + half + 1) * far;
      const left = anchor === "start" ? nx : anchor === "end" ? nx - width : nx - width / 2;
      return { nx, ny, anchor, far, rect: { i, x0: left, y0: ny - half, x1: left + width, y1: ny + half } };
    })).find(({ rect }) => rect.x0 >= box.x0 && rect.x1 <= box.x1 && rect.y0 >= box.y0 && rect.y1 <= box.y1
      && taken.every((o) => o.i === i || o.x1 <= rect.x0 || rect.x1 <= o.x0 || o.y1 <= rect.y0 || rect.y1 <= o.y0));
    if (!place) continue;
    const { nx, ny, anchor, far, rect } = place;
    // A leader from the point's edge to the name's nearest side.
    const [tx, ty] = [Math.min(Math.max(x, rect.x0), rect.x1), Math.min(Math.max(y, rect.y0), rect.y1)];
    const d = Math.hypot(tx - x, ty - y);
    const leader = far > 1 && d > reach(i) ? [x + ((tx - x) * reach(i)) / d, y + ((ty - y) * reach(i)) / d, tx, ty] : null;
    names.push({ i, x: nx, y: ny, anchor, leader });
    taken.push(rect);
  }
  return names;
}

/** What an image's names and list leave out, in a sentence. */
function listedNote({ listed, strongest }, names, drawnCount, choice) {
  const kept = choice.filter.trim() ? " kept" : "";
  const heads = strongest === 1 ? `the${kept} head` : `the ${strongest.toLocaleString("en")}${kept} heads`;
  const ringed = listed.length > strongest ? " and the ringed head" : "";
  const others = drawnCount - listed.length;
  const rest = others > 0 ? ` The other ${others.toLocaleString("en")} heads drawn are not named.` : "";
  const missing = listed.length - names.length;
  return `Named at their points and listed on the right: ${heads} of the largest ${choice.color}${ringed}.${rest}`
    + (missing > 0 ? ` ${missing} of the names had no room: the list's numbers place ${missing === 1 ? "that head" : "those heads"}.` : "");
}

/** The list's columns and their widths in px: a column as wide as its widest text. */
function listLayout(rows, listed, choice) {
  const columns = tableColumns(choice);
  const header = (key) => (key === "label" ? "head" : key);
  const widths = columns.map((key) => Math.max(textWidth(header(key), LIST_SIZE),
    ...listed.map((i) => textWidth(cellText(rows[i], key), LIST_SIZE))) + 10);
  const title = `Largest ${choice.color} first`;
  return { columns, header, widths, title, width: Math.max(widths.reduce((a, b) => a + b, 0), textWidth(title, LIST_SIZE)) };
}

/** The list beside an image's plot at x, y: its title, the columns' names, a row per listed head
 * (the ringed head's name in the ring's colour). */
function listScene(s, x, y, rows, listed, layout, selected) {
  const { columns, header, widths, title } = layout;
  s.text(x, y, title, { size: LIST_SIZE, role: "list-title" });
  let left = x;
  columns.forEach((key, c) => {
    // Names read from the left, numbers from the right (their decimals line up).
    const [cx, anchor] = key === "label" ? [left, "start"] : [left + widths[c] - 4, "end"];
    s.text(cx, y + LIST_PITCH + 2, header(key), { anchor, size: LIST_SIZE, role: "list-head" });
    listed.forEach((i, r) => {
      const color = key === "label" && i === selected ? RING : null;
      s.text(cx, y + (r + 2) * LIST_PITCH + 4, cellText(rows[i], key), { anchor, size: LIST_SIZE, color, role: "list-cell" });
    });
    left += widths[c];
  });
}

/**
 * The finder's scatter as one scene, for the screen's canvas (labels: false) and for images and
 * the kernel's picture (labels: the title, and under it what the filter keeps): each head a point
 * at its x and y metrics; the heads the filter keeps in viridis by the colour metric, drawn over
 * those it drops (faded, smaller); the chosen head ringed; the axes named, their ends in numbers;
 * under them a colour bar of the colour metric. An image also names the kept heads of the largest
 * colour values at their points and lists them with their numbers right of the plot (listedHeads),
 * and says what it leaves out. maxPoints (a picture's thinning): at most that
 * many points, the dropped heads left out first, then the kept heads of the smallest colour
 * values, as the picture says. state: {nLayers, nHeads, measures: [{key, values}]}; choice:
 * finderChoice's.
 * → {scene, xy: Float32Array(2 · heads), each head's point in scene px (NaN where none is drawn),
 *    kept: Set of row indices, problem: "" or why the filter does not read, listed: row indices named}
 */
export function finderPlot(state, choice, { title = "", labels = true, maxPoints = Infinity, rows = headRows(state) } = {}) {
  const keys = state.measures.map((m) => m.key);
  const { kept, problem } = keptHeads(rows, keys, choice.filter);
  const [[x0, x1], [y0, y1], [c0, c1]] = [axisRange(rows, choice.x), axisRange(rows, choice.y), extent(rows, choice.color)];
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

  // Where each point is in the plot's box (its top left at 0, 0): the image's notes above it are
  // written once its names are placed, and move the box down.
  const bx = (v) => LEFT + INSET + ((v - x0) / (x1 - x0)) * (PLOT - 2 * INSET);
  const by = (v) => PLOT - INSET - ((v - y0) / (y1 - y0)) * (PLOT - 2 * INSET);
  const inBox = (i) => [bx(rows[i][choice.x]), by(rows[i][choice.y])];
  const listing = labels ? listedHeads(rows, [...faded, ...shown], kept, choice.color, selected) : { listed: [], strongest: 0 };
  const { listed } = listing;
  // A name may reach into the margins around the box: above it, under the notes, and right of it.
  const names = placeNames(rows, listed, [...faded, ...shown], inBox, { x0: LEFT + 1, y0: -6, x1: LEFT + PLOT + RIGHT + GAP - 4, y1: PLOT - 1 },
    selected);
  if (listed.length) notes.push(listedNote(listing, names, faded.length + shown.length, choice));

  const plotWidth = LEFT + PLOT + RIGHT;
  const list = listed.length ? listLayout(rows, listed, choice) : null;
  const width = plotWidth + (list ? GAP + list.width : 0);
  const lines = labels ? notes.flatMap((note) => wrapText(note, width - 12, 11)) : [];
  const top = labels ? 30 + lines.length * 15 : 8;
  const bottom = top + PLOT;
  const s = createScene(width, bottom + 36 + BAR_HEIGHT + 4, { background: labels });
  if (labels) {
    s.text(6, 12, title, { role: "title" });
    lines.forEach((line, i) => { s.text(6, 28 + i * 15, line, { size: 11, role: "subtitle" }); });
  }
  // The axes: a line each, their ends in numbers, their metrics named.
  const px = bx;
  const py = (v) => top + by(v);
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
  // An image's names over the points, and its list right of the plot.
  for (const { i, x, y, anchor, leader } of names) {
    if (leader) s.segment(leader[0], top + leader[1], leader[2], top + leader[3], LEADER);
    s.text(x, top + y, rows[i].label, { anchor, size: NAME_SIZE, role: "point-name" });
  }
  if (list) listScene(s, plotWidth + GAP, top + 4, rows, listed, list, selected);
  if (selected >= 0 && Number.isFinite(xy[2 * selected])) {
    s.circle(xy[2 * selected], xy[2 * selected + 1], RING_RADIUS, "none", "selected", { stroke: RING, strokeWidth: 2 });
  }
  return { scene: s.scene, xy, kept, problem, listed };
}

/** The finder's picture (analysis_view.js): finderPlot of the state's own choice (analysis_choice). */
export function finderScene(state, options = {}) {
  return finderPlot(state, finderChoice(state.measures.map((m) => m.key), state.choice), options).scene;
}
