"""Small random models of each family, for tests that check a formula on every layout:
- FAMILIES (value norms, contributions): sharpened so that a wrong key, head or bias shows (and
  tiny_bart, an encoder-decoder, sharpened too);
- families() (long inputs, generation): decoders of the layouts whose attention the engine
  recomputes (grouped-query attention, sliding windows, soft-capping, sink logits, fused q/k/v),
  scaled up so that attention is sharp and a wrong pairing, mask or scale would show."""

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


def tiny_bart(vocab_size: int = VOCAB, lm_head: bool = False, **config):
    """A sharpened BART (encoder, decoder and cross-attention; value and output biases); with
    lm_head its conditional-generation model (what writes). `config`: settings to change."""
    torch.manual_seed(0)
    model = transformers.BartForConditionalGeneration if lm_head else transformers.BartModel
    return sharpened(model(transformers.BartConfig(**{
        **dict(vocab_size=vocab_size, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64),
        **config})))


def tiny_t5(vocab_size: int = VOCAB, lm_head: bool = True):
    """A sharpened T5: no scaling of q·k, a learned relative-position bias added to the scores (few
    buckets and a short maximum distance, so that the logarithmic buckets past it are reached by
    a short text), cross-attention without one; with lm_head its conditional-generation model."""
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration if lm_head else transformers.T5Model
    return sharpened(model(transformers.T5Config(
        vocab_size=vocab_size, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4, decoder_start_token_id=0,
        relative_attention_num_buckets=8, relative_attention_max_distance=16)))


def gated_qwen3_next():
    """A sharpened Qwen3-Next of softmax-attention layers only (no linear attention): its query
    projection gives each head's query and an output gate, σ(gate) multiplying the head's output."""
    torch.manual_seed(0)
    return sharpened(transformers.Qwen3NextModel(transformers.Qwen3NextConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=64, moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=2,
        num_experts_per_tok=1, max_position_embeddings=64, attention_bias=True, layer_types=["full_attention"] * 2)))


# Decoders whose attention the engine recomputes (long inputs, generation).
TEXT = "The café is naïve, and the lake near Zürich is cold. " * 4
SHAPE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
             max_position_embeddings=512)


def scaled_up(model):
    """Every matrix × 4: sharp attention from the default initialisation, so that a wrong pairing,
    mask or scale shows (the long-input and generation tests)."""
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


def model_state(model) -> tuple:
    """What a run must leave as it came: each module's train/eval mode, the hooks, the config and
    its attention implementation. transformers' own hooks are not counted: it installs its output
    capture once, on a model's first call with output_attentions, whoever calls it."""
    hooks = sum(not getattr(hook, "__module__", "").startswith("transformers.")
                for m in model.modules() for hook in [*m._forward_hooks.values(), *m._forward_pre_hooks.values()])
    return ({name: m.training for name, m in model.named_modules()}, hooks, model.config.to_dict(),
            model.config._attn_implementation)
