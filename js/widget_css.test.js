// The widget's style sheets, as a notebook's page loads them (widget.js imports them).
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const sheets = [new URL("widget.css", import.meta.url),
  ...readdirSync(new URL("views/", import.meta.url)).filter((f) => f.endsWith(".css")).map((f) => new URL(`views/${f}`, import.meta.url))];

describe("the widget's CSS", () => {
  it("has no :has() rule: in JupyterLab every restyle of the page checked it through the document (16 ms each at 8,160 tokens)", () => {
    expect(sheets.length).toBeGreaterThan(1);
    for (const sheet of sheets) expect(readFileSync(sheet, "utf8"), sheet.pathname).not.toMatch(/:has\(/);
  });
});
