"""The broker's Prometheus endpoint (``--metrics-url``), scraped and parsed with prometheus_client's own parser.

Each metric family becomes one number per scrape per label set (counters: the ``_total`` samples; histograms
and summaries: the ``_count`` samples, i.e. how many observations) and their sum; the console charts the
family's top series (a request count per API, an error count per API and error), counters as rates."""
from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class MetricValue:
    name: str
    type: str         # counter | gauge | histogram | summary | untyped ...
    help: str
    value: float      # the sum over every label set
    series: tuple[tuple[str, float], ...] = ()   # (label set as 'api=Fetch error=NONE', its value), for labelled ones

    def top_series(self, n: int) -> list[str]:
        """The label sets of the ``n`` largest series (by value: for a counter, its count so far)."""
        return [labels for labels, _ in sorted(self.series, key=lambda s: (-s[1], s[0]))[:n]]

    @property
    def is_cumulative(self) -> bool:
        """Charted as a per-second rate rather than as a level."""
        return self.type in ("counter", "histogram", "summary")


class ScrapeError(RuntimeError):
    pass


def scrape(url: str, timeout: float) -> list[MetricValue]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            text = answer.read(MAX_BYTES).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise ScrapeError(f"--metrics-url {url}: {getattr(e, 'reason', e)}") from None
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as e:
        raise ScrapeError(f"--metrics-url {url}: not Prometheus text format: {e}") from None
    out = []
    for fam in families:
        suffix = {"counter": "_total", "histogram": "_count", "summary": "_count"}.get(fam.type)
        samples = [s for s in fam.samples if suffix is None or s.name.endswith(suffix)]
        if fam.type == "counter" and not samples:  # a counter exposed without _total
            samples = list(fam.samples)
        if samples:
            per_labels: dict[str, float] = {}
            for s in samples:
                labels = " ".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                per_labels[labels] = per_labels.get(labels, 0.0) + s.value
            series = tuple(sorted(per_labels.items())) if any(per_labels) else ()
            out.append(MetricValue(fam.name, fam.type, fam.documentation, sum(s.value for s in samples), series))
    return out
