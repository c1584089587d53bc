"""Small random models of each family, for tests that check a formula on every layout (value
norms, contributions): sharpened so that a wrong key, head or bias shows."""

from __future__ import annotations

import torch
import transformers

VOCAB = 30522
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)


def sharpened(model):
    """Weights of about 0.2 (not the default 0.02, whose near-uniform attention hides a wrong key or
    head) and non-zero biases (a fresh Qwen2's are zero: the value bias must be exercised)."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 2 and "embed" not in name:
                parameter.normal_(0, 0.2)
            elif name.endswith("bias"):
                parameter.normal_(0, 0.1)
    return model.eval()


FAMILIES = {
    "bert (the embedded MiniLM)": None,
    "llama (grouped-query)": lambda: transformers.LlamaModel(transformers.LlamaConfig(vocab_size=VOCAB, num_key_value_heads=2, **SMALL)),
    "qwen2 (value biases, grouped-query)": lambda: transformers.Qwen2Model(
        transformers.Qwen2Config(vocab_size=VOCAB, num_key_value_heads=2, **SMALL)),
    "gpt2 (fused q|k|v, Conv1D)": lambda: transformers.GPT2Model(
        transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64)),
}
