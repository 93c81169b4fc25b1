"""The report's bar and interval charts drawn as SVG by hand: rows of bars or intervals against
a value axis (forest plots, label counts, latency percentiles) and a histogram. They are most
of a report's charts, and matplotlib's layout and text measuring cost a two-run report more
than its statistics did; the few chart kinds left in :mod:`evalkit.report._charts` (matrix,
reliability, scatter) still use it.

Text widths are estimated from the font size, on the wide side (DejaVu Sans, the usual
``sans-serif`` on Linux, is among the widest), so labels neither overflow the chart nor run
into each other; tests/report/test_browser.py checks that in Chromium."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from html import escape

__all__ = ["Canvas", "nice_ticks", "text_width", "tick_text"]

INK = "#24292f"
GRID = "#d0d7de"
FONT = 11  # px: tick labels and row names
TITLE = 13  # px, bold


def text_width(text: str, size: float, bold: bool = False) -> float:
    """A generous estimate of ``text``'s width in px at ``size`` px."""
    return len(text) * size * (0.68 if bold else 0.62)


def tick_text(v: float) -> str:
    """A tick's label: up to 4 significant digits, no trailing zeros, no ``-0``."""
    if abs(v) < 1e-12:
        return "0"
    return f"{v:.4g}"


def nice_ticks(lo: float, hi: float, most: int) -> list[float]:
    """Round tick values inside [lo, hi], at most ``most`` of them (1, 2, 2.5 or 5 × 10^k
    apart)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    most = max(2, most)
    base = 10 ** math.floor(math.log10((hi - lo) / (most - 1)) - 1)
    # the smallest round step that puts at most ``most`` ticks in the range
    for step in (m * base * 10 ** k for k in range(4) for m in (1, 2, 2.5, 5)):
        first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
        if last - first + 1 <= most:
            break
    return [round(k * step, 12) for k in range(first, last + 1)]


def span(values: Sequence[float], zero: bool = False) -> tuple[float, float]:
    """The axis range of ``values`` (with 0 when ``zero``), padded 5% each side."""
    finite = [v for v in values if math.isfinite(v)] + ([0.0] if zero else [])
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if hi == lo:
        pad = abs(lo) * 0.1 or 0.5
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return (lo if zero and lo == 0 else lo - pad), (hi if zero and hi == 0 else hi + pad)


class Canvas:
    """An SVG being drawn, in px from the top left."""

    def __init__(self, width: float, height: float) -> None:
        self.width, self.height = width, height
        self.parts: list[str] = []

    def text(self, x: float, y: float, s: str, size: float = FONT, anchor: str = "start",
             bold: bool = False, color: str = INK, rotate: bool = False) -> None:
        """``s`` with its vertical middle at ``y`` (rotated a quarter turn when ``rotate``)."""
        extra = ' font-weight="bold"' if bold else ""
        if rotate:
            extra += f' transform="rotate(-90 {x:.1f} {y:.1f})"'
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" '
                          f'text-anchor="{anchor}" dominant-baseline="central" fill="{color}"'
                          f'{extra}>{escape(s)}</text>')

    def rect(self, x: float, y: float, w: float, h: float, color: str) -> None:
        self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" '
                          f'height="{max(h, 0):.1f}" fill="{color}"/>')

    def path(self, d: str, color: str = INK, width: float = 1.0, fill: str = "none",
             opacity: float = 1.0) -> None:
        alpha = f' stroke-opacity="{opacity}"' if opacity < 1 else ""
        self.parts.append(f'<path d="{d}" stroke="{color}" stroke-width="{width}" '
                          f'fill="{fill}"{alpha}/>')

    def dot(self, x: float, y: float, r: float, color: str) -> None:
        self.parts.append(f'<path d="M{x - r:.1f} {y:.1f}a{r} {r} 0 1 0 {2 * r} 0a{r} {r} 0 '
                          f'1 0 {-2 * r} 0z" fill="{color}"/>')

    def title(self, text: str) -> float:
        """``text`` wrapped to the width (two lines at most, then cut) at the top; the y
        below it."""
        per_line = max(20, int((self.width - 12) / (TITLE * 0.68)))
        short = text if len(text) <= 2 * per_line else text[: 2 * per_line - 1] + "…"
        lines = textwrap.wrap(short, per_line) or [""]
        y = 6.0
        for line in lines[:2]:
            self.text(self.width / 2, y + TITLE * 0.6, line, TITLE, "middle", bold=True)
            y += TITLE * 1.3
        return y + 4

    def legend(self, y: float, items: Sequence[tuple[str, str]]) -> None:
        """Colour keys and names, centred on one line at ``y``."""
        widths = [14 + text_width(name, FONT) + 12 for name, _ in items]
        x = (self.width - sum(widths)) / 2
        for (name, color), w in zip(items, widths, strict=True):
            self.rect(x, y - 5, 10, 10, color)
            self.text(x + 14, y, name)
            x += w

    def svg(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width:.0f}" '
                f'height="{self.height:.0f}" viewBox="0 0 {self.width:.0f} '
                f'{self.height:.0f}" font-family="sans-serif" role="img">'
                + "".join(self.parts) + "</svg>")


def value_axis(c: Canvas, left: float, right: float, top: float, bottom: float,
               lo: float, hi: float, label: str, horizontal: bool = True) -> None:
    """Ticks, grid lines and the label of the value axis: along the bottom when
    ``horizontal``, else up the left side."""
    if horizontal:
        most = int((right - left) // (text_width("-0.0000", FONT) + 12)) + 1
        ticks = nice_ticks(lo, hi, most)
        scale = (right - left) / (hi - lo)
        for t in ticks:
            x = left + (t - lo) * scale
            c.path(f"M{x:.1f} {top:.1f}V{bottom:.1f}", GRID, 0.8)
            c.path(f"M{x:.1f} {bottom:.1f}v4", INK, 0.8)
            c.text(x, bottom + 12, tick_text(t), anchor="middle")
        c.path(f"M{left:.1f} {bottom:.1f}H{right:.1f}", INK, 0.8)
        c.text((left + right) / 2, bottom + 30, label, anchor="middle")
    else:
        most = int((bottom - top) // (FONT * 2.2)) + 1
        ticks = nice_ticks(lo, hi, most)
        scale = (bottom - top) / (hi - lo)
        for t in ticks:
            y = bottom - (t - lo) * scale
            c.path(f"M{left:.1f} {y:.1f}H{right:.1f}", GRID, 0.8)
            c.path(f"M{left - 4:.1f} {y:.1f}h4", INK, 0.8)
            c.text(left - 6, y, tick_text(t), anchor="end")
        c.path(f"M{left:.1f} {top:.1f}V{bottom:.1f}", INK, 0.8)


def rows_chart(width: float, labels: Sequence[str], row_height: float, title: str,
               xlabel: str, lo: float, hi: float, legend: Sequence[tuple[str, str]] = ()
               ) -> tuple[Canvas, float, float, float, list[float]]:
    """A chart of one row per label against a horizontal value axis: the canvas (title,
    row names, axis drawn), the plot's left and right edge in px, px per unit of value, and
    each row's middle y."""
    names = [_fit(s, width * 0.42) for s in labels]
    c = Canvas(width, 0)
    top = c.title(title)
    left = 8 + max((text_width(s, FONT) for s in names), default=0) + 8
    right = width - 8 - text_width("-0.0000", FONT) / 2
    bottom = top + row_height * len(names)
    c.height = bottom + 40 + (22 if legend else 0)
    mids = [top + row_height * (i + 0.5) for i in range(len(names))]
    value_axis(c, left, right, top, bottom, lo, hi, xlabel)
    for y, s in zip(mids, names, strict=True):
        c.text(left - 6, y, s, anchor="end")
    if legend:
        c.legend(bottom + 50, legend)
    return c, left, right, (right - left) / (hi - lo), mids


def _fit(text: str, px: float) -> str:
    """``text`` cut (with an ellipsis) to at most ``px`` wide."""
    most = max(6, int(px / (FONT * 0.62)))
    return text if len(text) <= most else text[: most - 1] + "…"
