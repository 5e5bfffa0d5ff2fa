"""Scraping a tidelake metrics listener over HTTP, as Prometheus would: prometheus_client's text parser."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``url``/metrics by (sample name, sorted labels)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
        assert r.status == 200
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name: str, default: float | None = None, **labels) -> float:
    key = (name, tuple(sorted((k, str(v)) for k, v in labels.items())))
    if key not in samples:
        if default is not None:
            return default
        raise AssertionError(f"no sample {name}{labels} among {sorted(k for k in samples if k[0] == name)}")
    return samples[key]


def health(url: str, which: str) -> tuple[int, dict]:
    """(HTTP status, JSON body) of ``url``/health/``which``."""
    try:
        with urllib.request.urlopen(f"{url}/health/{which}", timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
