// @vitest-environment jsdom
import { expect, it } from "vitest";
import { VIEWS as DECLARED } from "../transport/contract.js";
import { VIEWS } from "./views.js";

it("has an adapter for every view src/attnscope/widget/views.py declares, in its order, with its label and modes", () => {
  expect(VIEWS.map((view) => view?.name)).toEqual(DECLARED.map((view) => view.name));
  for (const [i, view] of VIEWS.entries()) {
    expect({ name: view.name, label: view.label, modes: view.modes, thinning: view.thinning }).toEqual({
      name: DECLARED[i].name, label: DECLARED[i].label, modes: DECLARED[i].modes, thinning: DECLARED[i].thinning,
    });
    for (const method of ["create", "draw", "picture", "title"]) expect(typeof view[method]).toBe("function");
  }
});
