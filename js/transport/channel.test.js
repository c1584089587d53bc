import { describe, expect, it } from "vitest";
import { createChannel } from "./channel.js";

// A model two views share: each view's channel hears every reply, as anywidget delivers custom
// messages to every view of a model.
function sharedModel() {
  const listeners = [];
  const sent = [];
  return {
    sent,
    on: (_event, fn) => listeners.push(fn),
    off: (_event, fn) => listeners.splice(listeners.indexOf(fn), 1),
    send: (content) => sent.push(content),
    reply: (content) => { for (const fn of [...listeners]) fn(content, []); },
  };
}

describe("createChannel", () => {
  it("two views of one model never take each other's replies", async () => {
    const model = sharedModel();
    const first = createChannel(model);
    const second = createChannel(model);
    const rows = first.request("attention_rows", { token: 3 });
    const lists = second.request("growing_lists");
    const [rowsRequest, listsRequest] = model.sent;
    expect(rowsRequest.id).not.toBe(listsRequest.id);
    model.reply({ kind: "reply", type: "growing_lists", id: listsRequest.id, tokens: ["a"] });
    model.reply({ kind: "reply", type: "attention_rows", id: rowsRequest.id, token: 3 });
    expect((await lists).content.tokens).toEqual(["a"]);
    expect((await rows).content.token).toBe(3);
    first.destroy();
    second.destroy();
  });
});
