// Base64 both ways, without atob/btoa: they take strings of bytes, and are not everywhere the
// saved page's state is read (the kernel's picture of a view runs outside any browser).

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const INDEX = new Int16Array(128).fill(-1);
for (let i = 0; i < B64.length; i++) INDEX[B64.charCodeAt(i)] = i;

/** Bytes as base64. */
export function base64Encode(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const [a, b = 0, c = 0] = [bytes[i], bytes[i + 1], bytes[i + 2]];
    const n = (a << 16) | (b << 8) | c;
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < bytes.length ? B64[(n >> 6) & 63] : "=") + (i + 2 < bytes.length ? B64[n & 63] : "=");
  }
  return out;
}

/** Base64 text (padded or not) as bytes; the browser's own decoder where there is one (faster on
 * a saved page's tens of megabytes). */
export function base64Decode(text) {
  if (globalThis.atob) {
    const binary = globalThis.atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }
  return decodeHere(text);
}

/** The decoder used where there is no atob (exported for its test). */
export function decodeHere(text) {
  const clean = String(text).replace(/[^A-Za-z0-9+/]/g, "");
  const bytes = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let at = 0;
  for (let i = 0; i < clean.length; i += 4) {
    const n = (INDEX[clean.charCodeAt(i)] << 18) | (INDEX[clean.charCodeAt(i + 1)] << 12)
      | ((INDEX[clean.charCodeAt(i + 2)] & 63) << 6) | (INDEX[clean.charCodeAt(i + 3)] & 63);
    for (const [shift, need] of [[16, 2], [8, 3], [0, 4]]) if (i + need <= clean.length && at < bytes.length) bytes[at++] = (n >> shift) & 255;
  }
  return bytes;
}
