"""The report's charts as inline SVG. Bars and intervals (histograms, label counts, forest
plots, latency percentiles) are drawn by hand (:mod:`evalkit.report._svg`); the matrix,
reliability and scatter charts are matplotlib figures rendered to SVG (no pyplot, no GUI
backend, no script in the page, text as SVG text so the page stays small). Labels come from
the data (model names, judge labels), so mathtext is off: a ``$`` in a model name is a
dollar sign."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from evalkit.report import _svg

RAW = "#9aa5b1"
FILTERED = "#1f6feb"
ACCENT = "#d1242f"
PALETTE = ("#1f6feb", "#d29922", "#2da44e", "#cf222e", "#8250df", "#bf3989", "#0a7ea4",
           "#9a6700", "#57606a", "#6e7781")

_counter = 0


def _figure(width: float, height: float) -> Any:
    import matplotlib

    matplotlib.rcParams.update({
        "svg.fonttype": "none", "text.parse_math": False, "font.size": 9,
        "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False,
        "axes.titlesize": 10, "axes.titleweight": "bold", "legend.frameon": False,
    })
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _figure_svg(fig: Any) -> str:
    """The figure as an ``<svg>`` element (no XML prolog; ids unique in the page)."""
    import matplotlib

    global _counter
    _counter += 1
    matplotlib.rcParams["svg.hashsalt"] = f"evalkit-chart-{_counter}"
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    start, end = text.find("<metadata>"), text.find("</metadata>")
    return text[:start] + text[end + len("</metadata>"):] if 0 <= start < end else text


def _short(text: Any, n: int = 40) -> str:
    """A label from data, controls shown as escapes (a font has no glyph for them, and
    matplotlib's warning would print them raw), cut to ``n`` characters."""
    from evalkit.safetext import visible

    s = visible(text)
    return s if len(s) <= n else s[: n - 1] + "…"


def _title(ax: Any, text: Any, width_in: float) -> None:
    """``text`` as the axes' title, wrapped to the figure's width (two lines at most, then
    cut): a title wider than its figure is clipped by the SVG's edge."""
    import textwrap

    per_line = max(20, int(width_in * 72 / 6.2))  # bold 10 pt: about 6 pt a character
    lines = textwrap.wrap(_short(text, 2 * per_line), per_line) or [""]
    ax.set_title("\n".join(lines[:2]))


def histogram(lo: float, hi: float, raw: Sequence[int], filtered: Sequence[int],
              title: str) -> str:
    """Score distribution of one judge: every record (raw) behind the included ones."""
    width = 440.0
    c = _svg.Canvas(width, 300)
    top = c.title(_short(title, 200))
    k = len(raw)
    ymax = max([*raw, *filtered, 1])
    ticks = _svg.nice_ticks(0, ymax, 6)
    ytop = max(ticks[-1], ymax)
    left = 12 + _svg.FONT * 1.2 + max(_svg.text_width(_svg.tick_text(t), _svg.FONT)
                                        for t in ticks) + 8
    right = width - 8 - _svg.text_width("-0.0000", _svg.FONT) / 2
    bottom = c.height - 76
    _svg.value_axis(c, left, right, top + 6, bottom, 0, ytop, "", horizontal=False)
    c.text(12, (top + bottom) / 2, "records", rotate=True, anchor="middle")
    xs = (right - left) / k if k else 0
    for i, (r, f) in enumerate(zip(raw, filtered, strict=True)):
        x = left + i * xs
        for n, share, color in ((r, 1.0, RAW), (f, 0.6, FILTERED)):
            h = (bottom - top - 6) * n / ytop
            c.rect(x, bottom - h, xs * share, h, color)
    _svg.value_axis(c, left, right, bottom, bottom, lo, hi, "score")
    c.legend(bottom + 52, [(f"raw (n={sum(raw)})", RAW),
                           (f"filtered (n={sum(filtered)})", FILTERED)])
    return c.svg()


def label_bars(labels: dict[str, tuple[int, int]], title: str) -> str:
    """Label counts of one judge, raw beside filtered."""
    names = list(labels)[:20]
    lo, hi = _svg.span([v for n in names for v in labels[n]], zero=True)
    c, left, _, scale, mids = _svg.rows_chart(
        440.0, [_short(n) for n in names], 26, _short(title, 200), "records", lo, hi,
        [("raw", RAW), ("filtered", FILTERED)])
    for n, y in zip(names, mids, strict=True):
        raw, kept = labels[n]
        c.rect(left + (0 - lo) * scale, y - 10, raw * scale, 9, RAW)
        c.rect(left + (0 - lo) * scale, y + 1, kept * scale, 9, FILTERED)
    return c.svg()


def stacked_shares(slices: list[str], categories: list[str],
                   counts: dict[tuple[str, str], int], title: str) -> str:
    """A crosstab: per slice, the share of each category (a stacked bar), counts in labels."""
    slices = slices[:30]
    fig = _figure(6.4, 0.9 + 0.32 * len(slices))
    ax = fig.subplots()
    for i, s in enumerate(slices[::-1]):
        total = sum(counts.get((s, c), 0) for c in categories) or 1
        left = 0.0
        for j, c in enumerate(categories):
            n = counts.get((s, c), 0)
            share = n / total
            ax.barh(i, share, left=left, color=PALETTE[j % len(PALETTE)],
                    label=_short(c, 30) if i == 0 else None)
            if share > 0.07:
                ax.text(left + share / 2, i, str(n), ha="center", va="center", fontsize=7,
                        color="white")
            left += share
    ax.set_yticks(range(len(slices)), [_short(s) for s in slices[::-1]])
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of records (counts in the bars)")
    _title(ax, title, 6.4)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _figure_svg(fig)


def reliability(bins: list[dict[str, Any]], title: str) -> str:
    """A reliability diagram: accuracy against mean confidence per bin, bin counts below."""
    fig = _figure(4.2, 3.6)
    top, bottom = fig.subplots(2, 1, height_ratios=(3, 1), sharex=True)
    used = [b for b in bins if b.get("count")]
    top.plot([0, 1], [0, 1], ls="--", color=RAW, lw=1, label="perfect calibration")
    for b in used:
        lo = b["lo"] if b.get("lo") is not None else b["mean_confidence"]
        hi = b["hi"] if b.get("hi") is not None else b["mean_confidence"]
        top.bar(lo, b["accuracy"], width=max(hi - lo, 0.01), align="edge", color=FILTERED,
                alpha=0.35, edgecolor=FILTERED)
    top.plot([b["mean_confidence"] for b in used], [b["accuracy"] for b in used], "o-",
             color=FILTERED, label="accuracy per bin")
    top.set_ylim(0, 1)
    top.set_ylabel("accuracy")
    _title(top, title, 4.2)
    top.legend(fontsize=7, loc="upper left")
    for b in used:
        lo = b["lo"] if b.get("lo") is not None else b["mean_confidence"]
        hi = b["hi"] if b.get("hi") is not None else b["mean_confidence"]
        bottom.bar(lo, b["count"], width=max(hi - lo, 0.01), align="edge", color=RAW)
        bottom.text((lo + hi) / 2, b["count"], str(b["count"]), ha="center", va="bottom",
                    fontsize=6)
    bottom.set_xlim(0, 1)
    bottom.set_xlabel("confidence")
    bottom.set_ylabel("records")
    return _figure_svg(fig)


def agreement_matrix(names: list[str], cells: dict[tuple[str, str], dict[str, Any]],
                     title: str) -> str:
    """Judges (and human labels) against each other: Cohen's kappa as colour, kappa, r and n
    written in each cell."""
    k = len(names)
    fig = _figure(2.2 + 1.5 * k, 1.4 + 1.2 * k)
    ax = fig.subplots()
    grid = [[math.nan] * k for _ in range(k)]
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            cell = cells.get((a, b)) or cells.get((b, a))
            if i == j:
                grid[i][j] = 1.0
            elif cell and cell.get("kappa") is not None:
                grid[i][j] = cell["kappa"]
    image = ax.imshow(grid, cmap="RdYlGn", vmin=-1, vmax=1)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            cell = cells.get((a, b)) or cells.get((b, a))
            if i == j:
                text = "—"
            elif cell:
                parts = [f"κ {_num(cell.get('kappa'))}", f"r {_num(cell.get('pearson'))}",
                         f"n {_num(cell.get('n'))}"]
                text = "\n".join(parts)
            else:
                text = "not\nmeasured"
            ax.text(j, i, text, ha="center", va="center", fontsize=8.5)
    ax.set_xticks(range(k), [_short(n, 18) for n in names], rotation=30, ha="right")
    ax.set_yticks(range(k), [_short(n, 18) for n in names])
    _title(ax, title, fig.get_figwidth())
    fig.colorbar(image, ax=ax, shrink=0.8, label="Cohen's kappa")
    return _figure_svg(fig)


def _num(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, float) and abs(v) < 5e-4:
        return "0"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def scatter(x: Sequence[float], y: Sequence[float], a: str, b: str, n: int) -> str:
    """Two judges' scores, one point per record both scored (a seeded sample when many)."""
    fig = _figure(4.2, 3.6)
    ax = fig.subplots()
    ax.scatter(x, y, s=8, alpha=0.5, color=FILTERED, linewidths=0)
    lo = min([0.0, *x, *y])
    hi = max([1.0, *x, *y])
    ax.plot([lo, hi], [lo, hi], ls="--", color=RAW, lw=1)
    ax.set_xlabel(_short(a))
    ax.set_ylabel(_short(b))
    shown = f"{len(x):,} of {n:,} records (sampled)" if len(x) < n else f"{n:,} records"
    _title(ax, f"{a} vs {b}: {shown}", 4.2)
    return _figure_svg(fig)


def forest(labels: list[str], values: list[float | None], lows: list[float | None],
           highs: list[float | None], title: str, xlabel: str = "value") -> str:
    """Values with their confidence intervals, one row per slice (or run); a row with no
    value says so."""
    labels, values, lows, highs = labels[:40], values[:40], lows[:40], highs[:40]

    def ok(v: float | None) -> bool:
        return v is not None and math.isfinite(v)

    lo, hi = _svg.span([v for v in (*values, *lows, *highs) if ok(v)])  # type: ignore[misc]
    c, left, _, scale, mids = _svg.rows_chart(540.0, [_short(s) for s in labels], 22,
                                              _short(title, 200), xlabel, lo, hi)
    for v, low, high, y in zip(values, lows, highs, mids, strict=True):
        if not ok(v):
            c.text(left + 6, y, "no value", color=ACCENT)
            continue
        if ok(low) and ok(high):
            c.path(f"M{left + (low - lo) * scale:.1f} {y:.1f}"  # type: ignore[operator]
                   f"H{left + (high - lo) * scale:.1f}", FILTERED, 2.5, opacity=0.5)
        c.dot(left + (v - lo) * scale, y, 4, FILTERED)  # type: ignore[operator]
    return c.svg()


def grouped_bars(groups: list[str], series: dict[str, list[float | None]], title: str,
                 ylabel: str) -> str:
    """Bars per group (slice), one colour per series (e.g. p50/p95/p99); horizontal, so a
    slice's name is written whole on its own line (rotated names ran into each other). A
    series with no value in a group draws no bar there."""
    groups = groups[:20]
    k = max(len(series), 1)
    kept = {name: [v if v is not None and math.isfinite(v) else None for v in vals[:20]]
            for name, vals in series.items()}
    lo, hi = _svg.span([v for vals in kept.values() for v in vals if v is not None],
                       zero=True)
    legend = [(name, PALETTE[s % len(PALETTE)]) for s, name in enumerate(kept)]
    c, left, _, scale, mids = _svg.rows_chart(540.0, [_short(g) for g in groups],
                                              8 + 9 * k, _short(title, 200), ylabel, lo, hi,
                                              legend)
    for s, (_, vals) in enumerate(kept.items()):
        for y, v in zip(mids, vals, strict=False):
            if v is not None:
                x0 = left + (min(v, 0) - lo) * scale
                c.rect(x0, y - 4.5 * k + 9 * s, abs(v) * scale, 8,
                       PALETTE[s % len(PALETTE)])
    return c.svg()
