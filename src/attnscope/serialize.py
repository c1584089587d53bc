"""Tensors → binary buffers for the browser: {data: bytes, dtype, shape[, scale]}, never JSON lists.

anywidget hands `bytes` to JavaScript as a DataView (js/transport/codec.js decodes it).
"""

from __future__ import annotations

import numpy as np
import torch

UINT8_SCALE = 1.0 / 255.0
# A one-byte payload at most this share nonzero goes as a bitmap of its nonzero bytes and those
# bytes ("encoding": "nonzero"): a 512-token layer is mostly zero bytes, and every byte of it
# crosses the kernel, the Jupyter server, the websocket and the page (a third to a half of an
# edit's time past the forward). Denser ones (pooled thumbnails) go as they are.
NONZERO_SHARE = 0.6
# Smaller payloads (a short text's layer, a thumbnail) go as they are: nothing worth a second pass.
NONZERO_MIN_BYTES = 4096

# GPT-2 / RoBERTa byte-level BPE marks a leading space with "Ġ" and SentencePiece with "▁";
# show them as the spaces they stand for (BertViz's prettify_tokens does the same).
def quantize_uint8(values: torch.Tensor) -> dict:
    """Probabilities in [0, 1] → one byte each (value ≈ byte · scale), a quarter of float32."""
    # One float temporary, changed in place (each fresh one of a 512-token layer is 12 MB of
    # page faults). NaN (a broken head, which the view's notice names) is sent as 0: drawn as nothing.
    scaled = values.detach().to("cpu", torch.float32).mul(255.0)
    scaled.nan_to_num_(nan=0.0).clamp_(0.0, 255.0).round_()
    data = scaled.to(torch.uint8).numpy().reshape(-1)
    payload = {"dtype": "uint8", "shape": list(scaled.shape), "scale": UINT8_SCALE}
    nonzero = data != 0
    if data.size >= NONZERO_MIN_BYTES and np.count_nonzero(nonzero) <= NONZERO_SHARE * data.size:
        # Bit i % 8 of bitmap byte i // 8 (little bit order) says whether byte i is nonzero.
        payload["encoding"] = "nonzero"
        payload["data"] = np.packbits(nonzero, bitorder="little").tobytes() + np.compress(nonzero, data).tobytes()
    else:
        payload["data"] = data.tobytes()
    return payload


def encode_float16(values: torch.Tensor) -> dict:
    """Signed values (queries, keys, scores) → float16, little-endian."""
    data = values.detach().to("cpu", torch.float16).contiguous()
    return {"data": data.numpy().tobytes(), "dtype": "float16", "shape": list(values.shape)}


def encode_float32(values: torch.Tensor) -> dict:
    """Exact attention (rows and tiles of long inputs) as float32, little-endian."""
    data = values.detach().to("cpu", torch.float32).contiguous()
    return {"data": data.numpy().tobytes(), "dtype": "float32", "shape": list(values.shape)}


def decode(payload: dict) -> torch.Tensor:
    """The inverse of the encoders above (the tests read payloads back with it)."""
    dtypes = {"uint8": torch.uint8, "float16": torch.float16, "float32": torch.float32}
    if payload.get("encoding") == "nonzero":
        count = int(np.prod(payload["shape"]))
        given = np.frombuffer(payload["data"], dtype=np.uint8)
        nonzero = np.unpackbits(given[: (count + 7) // 8], count=count, bitorder="little").astype(bool)
        data = np.zeros(count, dtype=np.uint8)
        data[nonzero] = given[(count + 7) // 8:]
        payload = {**payload, "data": data.tobytes()}
    flat = torch.frombuffer(bytearray(payload["data"]), dtype=dtypes[payload["dtype"]])
    values = flat.view(payload["shape"]).to(torch.float32)
    return values * payload["scale"] if "scale" in payload else values


def pool_thumbnails(attention: torch.Tensor, size: int) -> torch.Tensor:
    """layers × heads × Tq × Tk → layers × heads × min(Tq, size) × min(Tk, size), by max pooling
    (cross-attention maps are not square).

    Max (not mean) pooling keeps thin structures such as a diagonal or one [SEP] column visible
    in a thumbnail; it runs on the tensor's device.
    """
    n_layers, n_heads, n_queries, n_keys = attention.shape
    if n_queries <= size and n_keys <= size:
        return attention
    rows, cols = min(n_queries, size), min(n_keys, size)
    flat = attention.reshape(n_layers * n_heads, 1, n_queries, n_keys)
    pooled = torch.nn.functional.adaptive_max_pool2d(flat, (rows, cols))
    return pooled.reshape(n_layers, n_heads, rows, cols)
