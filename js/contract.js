// The synced traits of the widget, by name. Each is declared and documented once, in
// src/attnscope/widget.py (`synced(...)`: what it holds, who writes it, what a saved page does);
// tests/test_contract.py fails when this list and that one differ.
export const TRAITS = [
  "analysis", "attention", "attention_part", "causal", "editable", "error", "has_queries_keys", "heads",
  "include_heads", "include_layers", "key_tokens", "layer", "mask_summary", "masked_heads", "model_name",
  "n_heads", "n_layers", "neuron_head", "neuron_query", "notice", "parts", "request", "result_id", "rollout",
  "sentence_b_start", "sentence_filter", "show_change", "text", "text_b", "theme", "thumbnails", "tokens",
  "view", "word_level",
];
