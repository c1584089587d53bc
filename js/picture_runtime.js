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

// Counts as the views write them ("5,120 heads"): this engine's toLocaleString does not group digits.
if ((1000).toLocaleString("en") !== "1,000") {
  Object.defineProperty(Number.prototype, "toLocaleString", {
    value() {
      const [whole, fraction] = String(this).split(".");
      const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
      return fraction === undefined ? grouped : `${grouped}.${fraction}`;
    },
    configurable: true,
    writable: true,
  });
}
