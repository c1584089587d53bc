"""Run the front end's own modules (js/**/*.js, no bundle) in Node.js from a Python test: the neuron
view's maths has one definition, js/drawing/neuron_maths.js, and the tests hold it against the model."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

JS = Path(__file__).resolve().parent.parent / "js"


def run_js(body: str, payload: Any) -> Any:
    """`body`, an ES module's code that reads `input` (payload, through JSON) and ends with
    `output = ...`, run in Node.js with `js` as the folder js/ (import from `${js}/<folder>/x.js`)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    script = (f'import {{ readFileSync }} from "node:fs";\nconst js = {json.dumps(JS.as_uri())};\n'
              'const input = JSON.parse(readFileSync(0, "utf8"));\nlet output;\n'
              f"{body}\nprocess.stdout.write(JSON.stringify(output));\n")
    # The modules are ES modules in a package without "type": "module": Node tells by their syntax.
    done = subprocess.run([node, "--experimental-detect-module", "--input-type=module", "-e", script],
                          input=json.dumps(payload), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# Float64Array → a list; -Infinity and NaN travel as strings (JSON has neither).
_LISTS = "const list = (a) => (a ? Array.from(a, (v) => (Number.isFinite(v) ? v : String(v))) : null);"


def neuron_maths(inputs: dict) -> dict:
    """js/drawing/neuron_maths.js neuronMaths on plain numbers (lists, float64): each result as a list."""
    return run_js(_LISTS + """
const { neuronMaths } = await import(`${js}/drawing/neuron_maths.js`);
const r = neuronMaths(input);
output = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === "number" ? v : list(v)]));
""", inputs)


def saved_neuron_answer(page: dict, request: dict) -> dict:
    """js/transport/saved.js neuronAnswer for a saved page's data (export.page_data): its content, and each
    buffer base64-encoded under "buffers"."""
    return run_js("""
const { neuronAnswer, withBuffers } = await import(`${js}/transport/saved.js`);
const { state, served } = withBuffers(input.page.json, input.page.buffers);
const answer = neuronAnswer(served.neuron, input.request, state);
const base64 = (view) => Buffer.from(view.buffer, view.byteOffset, view.byteLength).toString("base64");
output = answer.error ? answer : { content: answer.content, buffers: answer.buffers.map(base64) };
""", {"page": page, "request": request})


def live_neuron_answer(content: dict, buffers: list[bytes], request: dict) -> dict:
    """What the live view cuts from the kernel's answer to a "neuron" request (a layer's store,
    js/transport/requests.js neuronStore) for one head and query, as saved_neuron_answer gives it."""
    return run_js("""
const { neuronStore } = await import(`${js}/transport/requests.js`);
const { neuronAnswer } = await import(`${js}/transport/saved.js`);
const view = (bytes) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
const store = neuronStore(input.content, input.buffers.map((b) => view(Buffer.from(b, "base64"))));
const answer = neuronAnswer(store, input.request, { result_id: input.content.result_id });
const base64 = (v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64");
output = answer.error ? answer : { content: answer.content, buffers: answer.buffers.map(base64) };
""", {"content": content, "buffers": [base64.b64encode(b).decode("ascii") for b in buffers], "request": request})


def neuron_numbers(content: dict, buffers: list[bytes]) -> dict:
    """js/transport/requests.js neuronNumbers (decode the float16 inputs, then the maths) on an answer."""
    return run_js(_LISTS + """
const { neuronNumbers } = await import(`${js}/transport/requests.js`);
const view = (bytes) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
const views = input.buffers.map((b) => view(Buffer.from(b, "base64")));
const r = neuronNumbers(input.content, views);
output = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === "number" || typeof v === "string" ? v : list(v)]));
""", {"content": content, "buffers": [base64.b64encode(b).decode("ascii") for b in buffers]})
