"""Small random decoders of the families whose attention the engine recomputes (grouped-query
attention, sliding windows, soft-capping, sink logits, fused q/k/v), shared by the long-input and
generation tests. Weights are scaled up so that attention is sharp and a wrong pairing, mask or
scale would show."""

from __future__ import annotations

import torch
import transformers

TEXT = "The café is naïve, and the lake near Zürich is cold. " * 4
SHAPE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
             max_position_embeddings=512)


def sharpened(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(4)
    return model.eval()


def families(window: int = 8, lm_head: bool = False):
    """name → a builder of the family's small model: the base model, or with lm_head its causal LM
    (what generates). `window`: the sliding windows' length."""
    def pick(base, causal):
        return causal if lm_head else base

    return {
        # Grouped-query attention (4 query heads on 2 key heads), a sliding-window layer.
        "qwen2 (GQA, sliding window)": lambda: pick(transformers.Qwen2Model, transformers.Qwen2ForCausalLM)(
            transformers.Qwen2Config(vocab_size=320, use_sliding_window=True, sliding_window=window, max_window_layers=1,
                                     layer_types=["full_attention", "sliding_attention"], **SHAPE)),
        "llama (GQA)": lambda: pick(transformers.LlamaModel, transformers.LlamaForCausalLM)(
            transformers.LlamaConfig(vocab_size=320, **SHAPE)),
        # Soft-capped scores and alternating sliding windows; eager only (sdpa cannot soft-cap).
        "gemma2 (soft-capping)": lambda: pick(transformers.Gemma2Model, transformers.Gemma2ForCausalLM)(
            transformers.Gemma2Config(vocab_size=320, head_dim=16, sliding_window=window, attn_logit_softcapping=5.0,
                                      query_pre_attn_scalar=16, **SHAPE)),
        # A sink logit per head in every row's softmax.
        "gpt-oss (sink logits)": lambda: pick(transformers.GptOssModel, transformers.GptOssForCausalLM)(
            transformers.GptOssConfig(vocab_size=320, head_dim=16, sliding_window=window, num_local_experts=2,
                                      num_experts_per_tok=1, layer_types=["sliding_attention", "full_attention"], **SHAPE)),
        "gpt2 (fused q/k/v)": lambda: pick(transformers.GPT2Model, transformers.GPT2LMHeadModel)(
            transformers.GPT2Config(vocab_size=320, n_embd=64, n_layer=2, n_head=4, n_positions=512)),
    }
