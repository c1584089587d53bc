"""The analyses over a corpus or one run, one module each, returning tidy DataFrames (layers and
heads counted from 0 in `layer`/`head`, and `label` "layer-head": Clark et al.'s head 8-10 is 7-9
here). Each corpus analysis is a partial aggregate per part of a corpus (`*_partial`, with its
`merge`), which runner.run_partial runs here or on a Ray cluster; corpus.py reads the corpus and
makes its batches. The formulas are the pure functions of attnscope.engine.formulas."""

from .ablation import head_ablation
from .comparison import attention_similarity, similarity_by_layer
from .contributions import contributions
from .coreference import coref_heads, read_conll2012
from .corpus import documents
from .head_finder import head_finder
from .head_roles import head_roles, roles
from .head_stats import behaviours, head_distances, head_stats
from .importance import attention_gradients, head_importance
from .knockout import knockout, knockout_heads, knockout_sweep
from .patterns import attention_patterns, patterns_by_layer
from .probes import attention_probes, glove_vectors
from .pruning import pruning_curve
from .rollout import rollout
from .sinks import attention_sinks
from .syntax import read_conllu, syntax_heads
from .value_flow import value_flow

__all__ = [
    "attention_gradients", "attention_patterns", "attention_probes", "attention_similarity", "attention_sinks",
    "behaviours", "contributions", "coref_heads", "documents", "glove_vectors", "head_ablation", "head_distances", "head_finder", "head_importance",
    "head_roles", "head_stats", "knockout", "knockout_heads", "knockout_sweep",
    "patterns_by_layer", "pruning_curve", "read_conll2012", "read_conllu", "roles", "rollout",
    "similarity_by_layer", "syntax_heads", "value_flow",
]
