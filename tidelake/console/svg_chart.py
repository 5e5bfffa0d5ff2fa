"""Line charts drawn as inline SVG on the server: no JavaScript chart library, and a chart is a fragment a page
can re-fetch to stay live. Each line carries its label and last value as data attributes."""
from __future__ import annotations

import math
import time
from typing import Sequence

from markupsafe import Markup, escape

from tidelake.console.history import Point

COLORS = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 12, 40


def _nice_step(span: float, ticks: int = 4) -> float:
    raw = span / ticks if span > 0 else 1.0
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _fmt(v: float) -> str:
    a = abs(v)
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}" if a < 1000 else f"{v:.0f}"


def line_chart(series: Sequence[tuple[str, list[Point]]], unit: str = "", now: float | None = None,
               empty_text: str = "collecting samples…") -> Markup:
    """An SVG with one polyline per (label, points), time on x (seconds before now), values on y from 0."""
    now = time.time() if now is None else now
    drawn = [(label, pts) for label, pts in series if pts]
    if not drawn:
        return Markup(f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" data-lines="0">'
                      f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" class="chart-empty">'
                      f'{escape(empty_text)}</text></svg>')
    t0 = min(p[0] for _, pts in drawn for p in pts)
    t1 = max(now, max(p[0] for _, pts in drawn for p in pts))
    t0 = min(t0, t1 - 10)
    vmax = max(max(p[1] for _, pts in drawn for p in pts), 0.0)
    step = _nice_step(vmax or 1.0)
    top = step * math.ceil((vmax or 1.0) / step)
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (t - t0) / (t1 - t0) * pw

    def y(v: float) -> float:
        return TOP + ph - (v / top) * ph

    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" data-lines="{len(drawn)}">']
    v = 0.0
    while v <= top + 1e-9:
        yy = y(v)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}"/>'
                   f'<text class="tick" x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
        v += step
    tstep = _nice_step(t1 - t0, 5)
    t = t1
    while t >= t0 - 1e-9:
        xx = x(t)
        ago = t1 - t
        label = "now" if ago < 1e-6 else f"-{_fmt(ago)}s"
        out.append(f'<text class="tick" x="{xx:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{label}</text>')
        t -= tstep
    if unit:
        out.append(f'<text class="tick" x="{LEFT}" y="{HEIGHT - 4}">{escape(unit)}</text>')
    legend_x = LEFT + 120
    for i, (label, pts) in enumerate(drawn):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        last = pts[-1][1]
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}" '
                   f'data-label="{escape(label)}" data-last="{last:g}" data-points="{len(pts)}"/>')
        if len(pts) == 1:
            out.append(f'<circle cx="{x(pts[0][0]):.1f}" cy="{y(last):.1f}" r="3" fill="{color}"/>')
        out.append(f'<rect x="{legend_x}" y="{HEIGHT - 14}" width="10" height="10" fill="{color}"/>'
                   f'<text class="legend" x="{legend_x + 14}" y="{HEIGHT - 5}">{escape(label)} ({_fmt(last)})</text>')
        legend_x += 24 + 7 * (len(label) + len(_fmt(last)) + 3)
    out.append("</svg>")
    return Markup("".join(out))
