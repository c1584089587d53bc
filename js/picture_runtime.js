// What the views' code uses and the kernel's JavaScript engine (QuickJS, picture.py) lacks. It
// only adds what is missing, in that engine's own global scope, never in a page's.
for (const type of [Array, String, Object.getPrototypeOf(Int8Array)]) {
  if (!type.prototype.at) {
    Object.defineProperty(type.prototype, "at", {
      value(index) {
        const i = Math.trunc(index) || 0;
        return this[i < 0 ? this.length + i : i];
      },
      configurable: true,
      writable: true,
    });
  }
}
