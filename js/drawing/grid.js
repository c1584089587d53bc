// The layers × heads grid that the model view and the analysis heatmap share: the labelled frame
// on screen (column labels above a canvas, row labels beside it, at the cell's pitch), the same
// labels in images, and which cell a pointer is over. Written once for both.
import { el } from "./dom.js";

/** The cell under canvas coordinates (x, y): {row, col}, or null outside the rows × cols grid. */
export function gridCellAt(x, y, cell, nRows, nCols) {
  const col = Math.floor(x / cell);
  const row = Math.floor(y / cell);
  if (x < 0 || y < 0 || row >= nRows || col >= nCols) return null;
  return { row, col };
}

/**
 * The frame: {frame, columns, rows, canvas, label(columnTexts, rowTexts), cellAt(event)}, with
 * the given class names (CSS and tests know them) and every label cell `defaultCell` px long
 * unless label() says otherwise.
 */
export function createGrid(parent, defaultCell, classes) {
  const frame = el("div", `attnscope-cellgrid ${classes.frame}`, parent);
  const corner = el("span", "attnscope-cellgrid-corner", frame);
  const columns = el("div", `attnscope-cellgrid-columns ${classes.columns}`, frame);
  const rows = el("div", `attnscope-cellgrid-rows ${classes.rows}`, frame);
  const canvas = el("canvas", `attnscope-cellgrid-canvas ${classes.canvas}`, frame);
  let size = [0, 0];
  let cell = defaultCell;

  return {
    frame, columns, rows, canvas,
    /** Labels at the pitch `cellSize` (the views may size cells to the width they have);
     * `cornerText` names the columns once, beside their labels (where those are numbers alone). */
    label(columnTexts, rowTexts, cellSize = defaultCell, cornerText = "") {
      cell = cellSize;
      corner.textContent = cornerText;
      columns.replaceChildren();
      for (const text of columnTexts) {
        const label = el("span", "", columns);
        label.textContent = text;
        label.style.width = `${cell}px`;
      }
      rows.replaceChildren();
      for (const text of rowTexts) {
        const label = el("span", "", rows);
        label.textContent = text;
        label.style.height = `${cell}px`;
        label.style.lineHeight = `${cell}px`;
      }
      size = [rowTexts.length, columnTexts.length];
    },
    cellAt(event) {
      const rect = canvas.getBoundingClientRect();
      return gridCellAt(event.clientX - rect.left, event.clientY - rect.top, cell, ...size);
    },
  };
}

/** The grid's labels in an image whose cells start at (left, top): columns above, rows at x = 6,
 * the corner's (what the columns are) at x = 6 beside the columns'. */
export function gridSceneLabels(s, { left, top, cell, columnTexts, rowTexts, columnY = 34, corner = "" }) {
  if (corner) s.text(6, columnY, corner, { size: 11, role: "corner-label" });
  columnTexts.forEach((text, col) => { if (text) s.text(left + (col + 0.5) * cell, columnY, text, { anchor: "middle", size: 11, role: "col-label" }); });
  rowTexts.forEach((text, row) => { if (text) s.text(6, top + (row + 0.5) * cell, text, { size: 11, role: "row-label" }); });
}
