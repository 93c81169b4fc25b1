"""The report's charts: matplotlib figures rendered to inline SVG (no pyplot, no GUI backend,
no script in the page, text as SVG text so the page stays small). Labels come from the data
(model names, judge labels), so mathtext is off: a ``$`` in a model name is a dollar sign."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

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


def _svg(fig: Any) -> str:
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
    fig = _figure(4.6, 2.9)
    ax = fig.subplots()
    k = len(raw)
    width = (hi - lo) / k
    edges = [lo + i * width for i in range(k)]
    ax.bar(edges, raw, width=width, align="edge", color=RAW, label=f"raw (n={sum(raw)})")
    ax.bar(edges, filtered, width=width * 0.6, align="edge", color=FILTERED,
           label=f"filtered (n={sum(filtered)})")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("score")
    ax.set_ylabel("records")
    _title(ax, title, 4.6)
    fig.legend(loc="outside lower center", fontsize=8, ncols=2)
    return _svg(fig)


def label_bars(labels: dict[str, tuple[int, int]], title: str) -> str:
    """Label counts of one judge, raw beside filtered."""
    names = list(labels)[:20][::-1]
    fig = _figure(4.6, 1.0 + 0.28 * len(names))
    ax = fig.subplots()
    y = range(len(names))
    ax.barh([i + 0.2 for i in y], [labels[n][0] for n in names], height=0.4, color=RAW,
            label="raw")
    ax.barh([i - 0.2 for i in y], [labels[n][1] for n in names], height=0.4, color=FILTERED,
            label="filtered")
    ax.set_yticks(list(y), [_short(n) for n in names])
    ax.set_xlabel("records")
    _title(ax, title, 4.6)
    fig.legend(loc="outside lower center", fontsize=8, ncols=2)
    return _svg(fig)


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
    return _svg(fig)


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
    return _svg(fig)


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
    return _svg(fig)


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
    return _svg(fig)


def forest(labels: list[str], values: list[float | None], lows: list[float | None],
           highs: list[float | None], title: str, xlabel: str = "value") -> str:
    """Values with their confidence intervals, one row per slice (or run)."""
    labels, values, lows, highs = labels[:40], values[:40], lows[:40], highs[:40]
    fig = _figure(5.6, 0.8 + 0.3 * len(labels))
    ax = fig.subplots()
    n = len(labels)
    for i, (v, lo, hi) in enumerate(zip(values, lows, highs, strict=True)):
        row = n - 1 - i
        if v is None or not math.isfinite(v):
            ax.text(0.0, row, "  undefined", va="center", fontsize=7, color=ACCENT,
                    transform=ax.get_yaxis_transform())
            continue
        if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
            ax.plot([lo, hi], [row, row], color=FILTERED, lw=2, alpha=0.5)
        ax.plot([v], [row], "o", color=FILTERED)
    ax.set_yticks(range(n), [_short(s) for s in labels[::-1]])
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(xlabel)
    _title(ax, title, 5.6)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


def grouped_bars(groups: list[str], series: dict[str, list[float | None]], title: str,
                 ylabel: str) -> str:
    """Bars per group (slice), one colour per series (e.g. p50/p95/p99); horizontal, so a
    slice's name is written whole on its own line (rotated names ran into each other). A
    series with no value in a group draws no bar there."""
    groups = groups[:20]
    k = max(len(series), 1)
    fig = _figure(5.6, 1.1 + 0.16 * len(groups) * k + 0.12 * len(groups))
    ax = fig.subplots()
    height = 0.8 / k
    n = len(groups)
    for s, (name, vals) in enumerate(series.items()):
        ys = [n - 1 - g - (s - (k - 1) / 2) * height for g in range(n)]
        kept = [(y, v) for y, v in zip(ys, vals[:20], strict=False)
                if v is not None and math.isfinite(v)]
        ax.barh([y for y, _ in kept], [v for _, v in kept], height=height,
                color=PALETTE[s % len(PALETTE)], label=name)
    ax.set_yticks(range(n), [_short(g) for g in groups[::-1]])
    ax.set_xlabel(ylabel)
    _title(ax, title, 5.6)
    ax.legend(fontsize=7, ncols=min(k, 4), loc="lower right")
    return _svg(fig)
