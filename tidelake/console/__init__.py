"""The web console (``tidelake console``): one process serving pages about the broker's topics, messages and
consumer groups, the pipelines of a directory of YAML configs, the tables of a directory, and live charts.

Layers, each file one concept: ``broker_view`` (cached admin reads) and ``message_browser`` / ``record_view``
(records made readable) for the broker; ``pipelines_view`` and ``tables_view`` for the lakehouse side;
``history`` + ``sampler`` (periodic samples kept in memory) + ``prometheus`` (``--metrics-url``) and
``svg_chart`` for charts; ``app`` wires them into Starlette routes rendered by the Jinja2 ``templates/``.
"""
