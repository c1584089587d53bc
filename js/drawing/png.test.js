// PNG bytes made without a canvas: the chunks a decoder reads, the pixels inflated back.
import { crc32, inflateSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { base64Decode, base64Encode, decodeHere } from "./base64.js";
import { encodePng } from "./png.js";

function chunks(png) {
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const found = [];
  for (let at = 8; at < png.length;) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(...png.subarray(at + 4, at + 8));
    found.push({ type, data: png.subarray(at + 8, at + 8 + length), crc: view.getUint32(at + 8 + length),
      expected: crc32(png.subarray(at + 4, at + 8 + length)) });
    at += 12 + length;
  }
  return found;
}

describe("png", () => {
  it("encodes RGBA pixels a decoder reads back", () => {
    const rgba = Uint8Array.from([255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    const png = encodePng(rgba, 3, 2);
    expect(Array.from(png.subarray(0, 8))).toEqual([137, 80, 78, 71, 13, 10, 26, 10]);
    const [ihdr, idat, iend] = chunks(png);
    expect([ihdr.type, idat.type, iend.type]).toEqual(["IHDR", "IDAT", "IEND"]);
    for (const c of [ihdr, idat, iend]) expect(c.crc).toBe(c.expected);
    const header = new DataView(ihdr.data.buffer, ihdr.data.byteOffset);
    expect([header.getUint32(0), header.getUint32(4), ihdr.data[8], ihdr.data[9]]).toEqual([3, 2, 8, 6]);
    const rows = inflateSync(idat.data);
    expect(Array.from(rows)).toEqual([0, ...rgba.subarray(0, 12), 0, ...rgba.subarray(12)]);
  });

  it("writes and reads base64 as btoa and atob do", () => {
    for (const bytes of [[], [1], [1, 2], [1, 2, 3], [255, 254, 253, 0, 10], Array.from({ length: 300 }, (_, i) => (i * 37) % 256)]) {
      const text = Buffer.from(bytes).toString("base64");
      expect(base64Encode(Uint8Array.from(bytes))).toBe(text);
      expect(Array.from(base64Decode(text))).toEqual(bytes);
      expect(Array.from(decodeHere(text))).toEqual(bytes);
    }
  });
});
