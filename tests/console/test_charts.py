"""The sampled history and the SVG charts drawn from it."""
from __future__ import annotations

from tidelake.console.history import History, rate
from tidelake.console.svg_chart import line_chart


def test_rate_of_a_counter_ignores_resets() -> None:
    assert rate([(0, 0), (2, 10), (4, 30), (5, 1)]) == [(2, 5.0), (4, 10.0), (5, 0.0)]


def test_history_is_bounded_and_keyed_by_kind() -> None:
    h = History(max_points=3)
    for t in range(5):
        h.add(("group_lag", "g"), t, t)
    h.add(("topic_end", "t"), 0, 1)
    assert h.points(("group_lag", "g")) == [(2, 2.0), (3, 3.0), (4, 4.0)]
    assert h.keys("group_lag") == [("group_lag", "g")]


def test_chart_has_one_line_per_series_with_its_last_value() -> None:
    svg = str(line_chart([("a", [(0, 1), (10, 5)]), ("b<&>", [(5, 2)]), ("empty", [])], now=10))
    assert svg.count("<polyline") == 2
    assert 'data-label="a" data-last="5"' in svg
    assert 'data-label="b&lt;&amp;&gt;"' in svg       # labels are escaped
    assert 'data-lines="0"' in str(line_chart([("a", [])]))
