// Many weighted lines in few strokes: lines are grouped by colour and by one of 32 opacity
// levels, and each group is one canvas path. 100k+ lines then cost a few hundred strokes.
const ALPHA_LEVELS = 32;

/**
 * lines: [{weight, ...}]; colorOf(line) → CSS colour; ends(line) → [x0, y0, x1, y1].
 */
export function strokeWeightedLines(ctx, lines, colorOf, ends, lineWidth = 1.5) {
  const groups = new Map();
  for (const line of lines) {
    const level = Math.min(ALPHA_LEVELS, Math.ceil(line.weight * ALPHA_LEVELS));
    const key = `${colorOf(line)}|${level}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(line);
  }
  ctx.lineWidth = lineWidth;
  for (const [key, group] of groups) {
    const [color, level] = key.split("|");
    ctx.globalAlpha = Number(level) / ALPHA_LEVELS;
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
