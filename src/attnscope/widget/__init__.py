"""The widget: the trait and message contract (contract, messages, views), the payloads the views
draw (payloads, neuron_numbers, long_answers), what the widget shows of a run (widget_state), the
checks of every write (widget_checks, page_input), the saved page and the picture (export,
picture) and the anywidget itself (attention_widget)."""
