// Requests and answers over the model's custom messages: the view's side of
// src/attnscope/widget/messages.py, and the answering side a saved page uses in the kernel's place.
//
// Envelopes (the same everywhere):
//   request {kind: "request", type, id, ...params}   answered by exactly one
//   reply   {kind: "reply", type, id, ...content}    (or {..., error})
//   event   {kind: "event", type, ...}               no answer

/** @typedef {{kind: string, type: string, id?: number, error?: string, [key: string]: any}} Envelope */
/** @typedef {{content: Envelope, buffers: DataView[]}} Answer */

// GPU work on a long input can take a while; past this the view says the kernel did not answer.
export const DEFAULT_TIMEOUT_MS = 120000;

/**
 * The view's channel on `model`: request(type, params) → Promise<Answer> (rejected with the
 * reply's error, or after timeoutMs); incoming requests (the kernel's, e.g. "image") are answered
 * by handlers[type](content, buffers) → {content, buffers} (or a Promise of it).
 */
// Request ids are the page's, not a view's: every view of a model hears every reply (a second view
// of one widget, a generation's view opened mid-way), and one's id 1 is not another's.
let nextId = 1;

export function createChannel(model, handlers = {}, { timeoutMs = DEFAULT_TIMEOUT_MS } = {}) {
  const pending = new Map();

  async function answer(request, buffers) {
    const envelope = { kind: "reply", type: request.type, id: request.id };
    try {
      const { content = {}, buffers: out = [] } = await handlers[request.type](request, buffers);
      model.send({ ...envelope, ...content }, undefined, out);
    } catch (err) {
      model.send({ ...envelope, error: err?.message ?? String(err) });
    }
  }

  function onMessage(message, buffers) {
    if (message?.kind === "reply" && pending.has(message.id)) {
      const { resolve, reject, timer } = pending.get(message.id);
      pending.delete(message.id);
      clearTimeout(timer);
      if (message.error) reject(new Error(message.error));
      else resolve({ content: message, buffers: buffers ?? [] });
    } else if (message?.kind === "request" && handlers[message.type]) {
      answer(message, buffers ?? []);
    }
  }
  model.on("msg:custom", onMessage);

  return {
    /** @returns {Promise<Answer>} */
    request(type, params = {}) {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`no answer to the ${type} request after ${Math.round(timeoutMs / 1000)} s: is the kernel running?`));
        }, timeoutMs);
        pending.set(id, { resolve, reject, timer });
        model.send({ kind: "request", type, id, ...params });
      });
    },
    notify(type, params = {}) {
      model.send({ kind: "event", type, ...params });
    },
    destroy() {
      model.off("msg:custom", onMessage);
      for (const { timer } of pending.values()) clearTimeout(timer);
      pending.clear();
    },
  };
}

/**
 * The answering side without a kernel (a saved page): a request sent to `send` is answered by
 * handlers[type](request) → {content, buffers} | {error}, delivered asynchronously to `deliver`
 * as the kernel's reply would be; events and unknown types get no answer.
 */
export function createResponder(handlers, deliver) {
  return function send(message) {
    if (message?.kind !== "request" || !handlers[message.type]) return;
    setTimeout(() => {
      const envelope = { kind: "reply", type: message.type, id: message.id };
      let answer;
      try {
        answer = handlers[message.type](message);
      } catch (err) {
        answer = { error: err?.message ?? String(err) };
      }
      if (answer.error) deliver({ ...envelope, error: answer.error }, []);
      else deliver({ ...envelope, ...answer.content }, answer.buffers ?? []);
    }, 0);
  };
}
