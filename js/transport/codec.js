// Binary payloads from the kernel: {data, dtype, shape[, scale]} → Float32Array.
// anywidget hands Python bytes over as a DataView that may start at a non-zero byteOffset of a
// larger buffer, so typed arrays are always built from (buffer, byteOffset, byteLength).

function bytesOf(data) {
  if (data instanceof DataView) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError(`attnscope: expected binary data, got ${data === null ? "null" : typeof data}`);
}

// IEEE 754 half → float (no Float16Array in older browsers).
export function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/**
 * A one-byte payload sent as its nonzero bytes (serialize.quantize_uint8, "encoding": "nonzero"):
 * a bitmap, bit i % 8 of byte i // 8 set where byte i is nonzero, then those bytes in order.
 * @param {Uint8Array} given
 * @param {number} count
 * @returns {Uint8Array}
 */
export function expandNonzero(given, count) {
  const mapLength = (count + 7) >> 3;
  const bytes = new Uint8Array(count);
  let next = mapLength;
  if (given.length < mapLength) throw new Error("attnscope: a nonzero-encoded payload shorter than its bitmap");
  for (let m = 0; m < mapLength; m++) {
    let bits = given[m];
    if (bits === 0) continue;
    const base = m << 3;
    while (bits !== 0) {
      const low = bits & -bits;
      bytes[base + 31 - Math.clz32(low)] = given[next++];
      bits ^= low;
    }
  }
  if (next !== given.length) {
    throw new Error(`attnscope: a nonzero-encoded payload of ${given.length} bytes does not match its bitmap`);
  }
  return bytes;
}

/**
 * @param {{data: DataView, dtype: string, shape: number[], scale?: number, encoding?: string}} payload
 * @returns {{values: Float32Array, shape: number[], bytes?: Uint8Array, scale?: number}}
 * A uint8 payload also keeps its bytes and scale, and decodes `values` on first use: the head
 * view finds its lines from the bytes (a quarter of the memory to scan) and decodes only for
 * hover or images.
 */
export function decodeArray({ data, dtype, shape, scale, encoding }) {
  const count = shape.reduce((a, b) => a * b, 1);
  const width = { uint8: 1, float16: 2, float32: 4 }[dtype];
  if (!width) throw new Error(`attnscope: unsupported dtype "${dtype}"`);
  if (encoding !== undefined && (encoding !== "nonzero" || dtype !== "uint8")) {
    throw new Error(`attnscope: unsupported encoding "${encoding}" of ${dtype} data`);
  }
  const bytes = encoding === "nonzero" ? expandNonzero(bytesOf(data), count) : bytesOf(data);
  if (bytes.byteLength !== count * width) {
    throw new Error(
      `attnscope: ${dtype} data of ${bytes.byteLength} bytes does not match shape [${shape.join(", ")}]`,
    );
  }
  if (dtype === "uint8") {
    const s = scale ?? 1 / 255;
    let values = null;
    return {
      shape: [...shape],
      bytes,
      scale: s,
      get values() {
        if (values === null) {
          values = new Float32Array(count);
          for (let i = 0; i < count; i++) values[i] = bytes[i] * s;
        }
        return values;
      },
    };
  }
  const values = new Float32Array(count);
  {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (dtype === "float16") for (let i = 0; i < count; i++) values[i] = halfToFloat(view.getUint16(2 * i, true));
    else for (let i = 0; i < count; i++) values[i] = view.getFloat32(4 * i, true);
    if (scale !== undefined) for (let i = 0; i < count; i++) values[i] *= scale;
  }
  return { values, shape: [...shape] };
}
