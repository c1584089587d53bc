"""The edges: the command line (cli), HTML written from a model and a text (render) and the
BertViz-compatible functions (bertviz_compat). attnscope.neuron_view stays at BertViz's path."""
