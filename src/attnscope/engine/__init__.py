"""The engine: a Hugging Face model loaded (models), run with its attention captured
(attention_model, hooks, fast_capture), and what a run keeps (results: the full attention, or q, k
and row log-sum-exps answered exactly on demand by exact_attention), with its tokens' labels and
the attention formulas of the papers (formulas). Nothing here knows of a widget."""
