// `npm run lint`: the front end's layers, checked as import-linter checks the Python ones. They are
// js/'s folders; ARCHITECTURE.md §0 draws them (tests/widget/test_contract.py holds it equal to LAYERS).
// Imports only point down: the entry points (js/*.js: widget.js, standalone.js, picture.js) import
// any layer, and nothing but an entry point imports one. A test (*.test.js) sits beside its module
// and may import from any layer; no module imports a test.
// Highest first.
const LAYERS = ["views", "controls", "transport", "drawing"];

const ENTRY = "^js/[^/]+\\.js$";
const TEST = "\\.test\\.js$";
const folder = (name) => `^js/${name}/`;

/** A layer's modules (not its tests) import no higher layer and no entry point. */
const importsOnlyDown = (name, index) => ({
  name: `${name}-imports-only-down`,
  severity: "error",
  comment: `js/${name}/ imports only ${[name, ...LAYERS.slice(index + 1)].map((n) => `js/${n}/`).join(", ")}.`,
  from: { path: folder(name), pathNot: TEST },
  to: { path: [ENTRY, ...LAYERS.slice(0, index).map(folder)] },
});

module.exports = {
  forbidden: [
    ...LAYERS.map(importsOnlyDown),
    {
      name: "no-folders-outside-the-layers",
      severity: "error",
      comment: "Every module below js/ is in a layer's folder (a new folder goes in LAYERS and ARCHITECTURE.md).",
      from: {},
      to: { path: "^js/[^/]+/", pathNot: `^js/(${LAYERS.join("|")})/[^/]+$` },
    },
    {
      name: "no-circular",
      severity: "error",
      comment: "A cycle of imports: move what both need into the lower module.",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-imported-tests",
      severity: "error",
      comment: "A test is never imported: what two tests share goes in a module.",
      from: {},
      to: { path: TEST },
    },
    {
      name: "no-orphans",
      severity: "error",
      comment: "A module nothing imports is dead code, or a view or layout that `make contract` did not list.",
      from: { orphan: true, path: "^js/", pathNot: [TEST, ENTRY, "\\.d\\.ts$"] },
      to: {},
    },
    {
      name: "reached-from-an-entry-point",
      severity: "error",
      comment: "Every module is in a bundle: one that only tests import is dead code.",
      from: { path: ENTRY, pathNot: TEST },
      to: { path: "^js/", pathNot: [TEST, ENTRY, "\\.d\\.ts$"], reachable: false },
    },
    {
      name: "not-to-unresolvable",
      severity: "error",
      comment: "An import that resolves to no file.",
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^tests/" },
    moduleSystems: ["es6"],
  },
};
