// Many weighted lines in few strokes: lines are grouped by colour and by one of 32 opacity
// levels, and each group is one path. 100k+ lines then cost a few hundred strokes. The screen
// (strokeWeightedLines) and the scene sinks (scene.js) share the grouping.
export const ALPHA_LEVELS = 32;

/** lines: [{weight, ...}]; colorOf(line) → CSS colour. → [{color, alpha, lines}] */
export function groupWeightedLines(lines, colorOf) {
  const groups = new Map();
  for (const line of lines) {
    const level = Math.min(ALPHA_LEVELS, Math.ceil(line.weight * ALPHA_LEVELS));
    const color = colorOf(line);
    const key = `${color}|${level}`;
    if (!groups.has(key)) groups.set(key, { color, alpha: level / ALPHA_LEVELS, lines: [] });
    groups.get(key).lines.push(line);
  }
  return [...groups.values()];
}

/**
 * lines: [{weight, ...}]; colorOf(line) → CSS colour; ends(line) → [x0, y0, x1, y1].
 */
export function strokeWeightedLines(ctx, lines, colorOf, ends, lineWidth = 1.5) {
  ctx.lineWidth = lineWidth;
  for (const { color, alpha, lines: group } of groupWeightedLines(lines, colorOf)) {
    ctx.globalAlpha = alpha;
    ctx.strokeStyle = color;
    ctx.beginPath();
    for (const line of group) {
      const [x0, y0, x1, y1] = ends(line);
      ctx.moveTo(x0, y0);
      ctx.lineTo(x1, y1);
    }
    ctx.stroke();
  }
  ctx.globalAlpha = 1;
}
