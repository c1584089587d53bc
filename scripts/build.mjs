// The front end's three bundles (esbuild), and the licences of the third-party code inside them.
//   widget.js (+ widget.css)          the anywidget module (ESM)
//   standalone.js (+ standalone.css)  a saved page's script (IIFE)
//   picture.js                        the kernel's picture drawer, run in QuickJS (IIFE)
//   THIRD_PARTY_LICENSES.txt          every bundled npm package's name, version, licence and text:
//                                     shipped in the wheel and written into every saved page
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "src", "attnscope", "static");
// ATTNSCOPE_READABLE=1 keeps names and whitespace, for a profiler's call tree.
const common = { bundle: true, minify: process.env.ATTNSCOPE_READABLE !== "1", logLevel: "warning", metafile: true, absWorkingDir: root };

const builds = await Promise.all([
  esbuild.build({ ...common, entryPoints: ["js/widget.js"], format: "esm", outdir: out }),
  esbuild.build({ ...common, entryPoints: ["js/standalone.js"], format: "iife", globalName: "attnscopeStandalone", outfile: join(out, "standalone.js") }),
  esbuild.build({ ...common, entryPoints: ["js/picture.js"], format: "iife", globalName: "attnscopePicture", outfile: join(out, "picture.js") }),
]);

// The packages whose files went into a bundle: node_modules/<name>/... or node_modules/@scope/<name>/...
const packages = new Set();
for (const { metafile } of builds) {
  for (const input of Object.keys(metafile.inputs)) {
    const match = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
    if (match) packages.add(match[1]);
  }
}

function licenceText(dir) {
  for (const name of ["LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE", "COPYING"]) {
    try {
      return readFileSync(join(dir, name), "utf8").trim();
    } catch {}
  }
  throw new Error(`${dir}: no licence file; a bundled package must ship its licence`);
}

const sections = [...packages].sort().map((name) => {
  const dir = join(root, "node_modules", name);
  const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  return `${meta.name} ${meta.version} (${meta.license})\n${meta.homepage ?? ""}\n\n${licenceText(dir)}`;
});
writeFileSync(
  join(out, "THIRD_PARTY_LICENSES.txt"),
  "attnscope's front end bundles the following packages, under their own licences.\n\n"
    + `${sections.join(`\n\n${"=".repeat(72)}\n\n`)}\n`,
);
