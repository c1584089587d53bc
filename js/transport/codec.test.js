import { describe, expect, it } from "vitest";
import { decodeArray, expandNonzero } from "./codec.js";

describe("decodeArray", () => {
  it("keeps a uint8 payload's bytes and decodes its values once, when first read", () => {
    const data = new Uint8Array([0, 51, 255]);
    const decoded = decodeArray({ data, dtype: "uint8", shape: [3], scale: 0.5 });
    expect(decoded.bytes).toEqual(data);
    expect(decoded.scale).toBe(0.5);
    expect(Array.from(decoded.values)).toEqual([0, 25.5, 127.5]);
    expect(decoded.values).toBe(decoded.values); // the same array: decoded once
  });

  it("reads uint8 from a DataView that starts inside a larger buffer", () => {
    const buffer = new ArrayBuffer(16);
    new Uint8Array(buffer).set([9, 9, 9, 0, 255, 51, 102, 9], 0);
    const view = new DataView(buffer, 3, 4); // byteOffset 3: ignoring it would read 9s
    const { values, shape } = decodeArray({ data: view, dtype: "uint8", shape: [2, 2], scale: 1 / 255 });
    expect(shape).toEqual([2, 2]);
    expect(Array.from(values)).toEqual([0, 1, 0.2, 0.4].map((v) => Math.fround(v)));
  });

  it("expands a nonzero-encoded uint8 payload: a bitmap of the nonzero bytes, then those bytes", () => {
    // 10 bytes [0, 7, 0, 0, 0, 0, 0, 0, 200, 3]: bits 1 and 8, 9 set (little bit order).
    const given = new Uint8Array([9, 9, 0b00000010, 0b00000011, 7, 200, 3]);
    const decoded = decodeArray({ data: new DataView(given.buffer, 2, 5), dtype: "uint8", shape: [2, 5], scale: 1, encoding: "nonzero" });
    expect(Array.from(decoded.bytes)).toEqual([0, 7, 0, 0, 0, 0, 0, 0, 200, 3]);
    expect(decoded.bytes.byteOffset).toBe(0); // the head view reads it four bytes at a time
    expect(Array.from(decoded.values)).toEqual([0, 7, 0, 0, 0, 0, 0, 0, 200, 3]);
    // A bitmap and bytes that disagree, or an encoding it does not know, are errors, not zeros.
    expect(() => expandNonzero(new Uint8Array([0b11, 0, 5]), 10)).toThrow(/does not match its bitmap/);
    expect(() => expandNonzero(new Uint8Array([0b1, 0, 5, 6]), 10)).toThrow(/does not match its bitmap/);
    expect(() => decodeArray({ data: given, dtype: "float32", shape: [1], encoding: "nonzero" })).toThrow(/unsupported encoding/);
    expect(() => decodeArray({ data: given, dtype: "uint8", shape: [7], encoding: "zip" })).toThrow(/unsupported encoding/);
  });

  it("reads float32 from an unaligned offset", () => {
    const buffer = new ArrayBuffer(13);
    const dv = new DataView(buffer);
    dv.setFloat32(1, 0.25, true);
    dv.setFloat32(5, -3.5, true);
    dv.setFloat32(9, 1e-3, true);
    const { values } = decodeArray({ data: new DataView(buffer, 1, 12), dtype: "float32", shape: [3] });
    expect(Array.from(values)).toEqual([0.25, -3.5, Math.fround(1e-3)]);
  });

  it("reads float16 (half precision) including negatives and subnormals", () => {
    const halves = new Uint16Array([0x3c00, 0xc000, 0x3555, 0x0001, 0x0000]); // 1, -2, ~0.3333, 2^-24, 0
    const { values } = decodeArray({ data: new DataView(halves.buffer), dtype: "float16", shape: [5] });
    expect(values[0]).toBe(1);
    expect(values[1]).toBe(-2);
    expect(values[2]).toBeCloseTo(1 / 3, 3);
    expect(values[3]).toBeCloseTo(2 ** -24, 12);
    expect(values[4]).toBe(0);
  });

  it("accepts ArrayBuffers and typed arrays too", () => {
    expect(Array.from(decodeArray({ data: new Uint8Array([255]), dtype: "uint8", shape: [1] }).values)).toEqual([1]);
    expect(decodeArray({ data: new Uint8Array([0, 0]).buffer, dtype: "uint8", shape: [2] }).values.length).toBe(2);
  });

  it("refuses data that does not match its shape or dtype", () => {
    const data = new DataView(new ArrayBuffer(6));
    expect(() => decodeArray({ data, dtype: "uint8", shape: [2, 2] })).toThrow(/6 bytes does not match shape \[2, 2\]/);
    expect(() => decodeArray({ data, dtype: "int64", shape: [6] })).toThrow(/unsupported dtype/);
    expect(() => decodeArray({ data: null, dtype: "uint8", shape: [0] })).toThrow(/expected binary data/);
  });
});
