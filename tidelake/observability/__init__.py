"""Metrics and health for every tidelake process: plain counters the hot paths bump (``*_stats.py``, no
prometheus import), Prometheus collectors that read them and the live state at scrape time
(``*_collector.py``), and the HTTP listener serving ``/metrics``, ``/health/live`` and ``/health/ready``
(``server.py``). Each process keeps its own ``CollectorRegistry``, never the global one."""
