"""What ``agreement``, ``judge_validation`` and ``disagreements`` share: two raters' scores
per record (judge A against judge B, or judge A against ``records.human_label``) over the
records both scored."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.checks import check_flag_at
from evalkit.metrics._signals import (
    JUDGMENT_FIELDS,
    SignalSpec,
    SliceConfig,
    above,
    excluded_mask,
    fetch,
    index_slices,
    judge_known,
    numbers,
    reasons,
    row_counts,
)


@dataclass(frozen=True)
class PairConfig(SliceConfig):
    judge_a: str = "???"  # a judge instance or imported score name
    judge_b: str | None = None  # the other judge; leave null and set human_label: true for labels
    human_label: bool = False  # compare judge_a with records.human_label instead of judge_b
    field_a: str = "value"  # judgment field read from judge_a: value, passed or label
    field_b: str = "value"  # judgment field read from judge_b (ignored for human labels)
    map_a: dict[str, float] = field(default_factory=dict)  # text -> number for judge_a's labels
    map_b: dict[str, float] = field(default_factory=dict)  # text -> number for judge_b / humans
    threshold: float = 0.5  # a score > threshold counts as 1 (flag_at; kappa, nominal alpha, …)
    threshold_b: float | None = None  # threshold for judge_b / human labels; default: threshold
    flip_b: bool = False  # b scores the opposite way (correctness vs hallucination): b -> 1 - b
    include_excluded: bool = False  # also pair records a filter set aside (auditing imports)
    flag_at: str = ">"  # a score at the threshold: ">" not flagged, ">=" flagged

    def validate(self) -> None:
        super().validate()
        if (self.judge_b is None) == (not self.human_label):
            raise ValueError("set exactly one of judge_b (a second judge) and "
                             "human_label: true (compare judge_a with records.human_label)")
        for key in ("field_a", "field_b"):
            if getattr(self, key) not in JUDGMENT_FIELDS:
                raise ValueError(f"{key}: {getattr(self, key)!r} is not one of "
                                 f"{', '.join(JUDGMENT_FIELDS)}")
        check_flag_at(self.flag_at)

    @property
    def spec_a(self) -> SignalSpec:
        return SignalSpec(judge=self.judge_a, field=self.field_a)

    @property
    def spec_b(self) -> SignalSpec:
        if self.human_label:
            return SignalSpec(column="human_label")
        return SignalSpec(judge=self.judge_b, field=self.field_b)

    @property
    def b_name(self) -> str:
        return "human_label" if self.human_label else str(self.judge_b)


@dataclass
class Pairs:
    """Every record of the run with both raters' scores (NaN where unusable)."""

    table: pa.Table  # record columns and the raw judgment fields
    a: np.ndarray  # continuous scores of rater a
    b: np.ndarray  # continuous scores of rater b (flipped when flip_b)
    a_bin: np.ndarray  # a past threshold (> or >=, flag_at)
    b_bin: np.ndarray  # b past threshold_b (then flipped when flip_b)
    why_a: list[str | None]
    why_b: list[str | None]
    excluded: np.ndarray
    undefined: str | None  # set when a judge left no judgment at all in this run

    def paired(self, idx: np.ndarray, include_excluded: bool) -> np.ndarray:
        """Indices (within ``idx``) of records both raters scored."""
        ok = ~np.isnan(self.a[idx]) & ~np.isnan(self.b[idx])
        if not include_excluded:
            ok &= ~self.excluded[idx]
        return idx[ok]


def load_pairs(con: Any, cfg: PairConfig, columns: list[str] | None = None) -> Pairs:
    """Both raters' scores for every record, plus the record ``columns`` asked for."""
    extra = ["value", "label", "passed", "explanation"]
    judge_fields = {"a": extra, "b": extra}
    table = fetch(con, {"a": cfg.spec_a, "b": cfg.spec_b},
                  [*cfg.slice_by, *(columns or [])], judge_fields)
    a, why_a = numbers(table, "a", cfg.spec_a, cfg.map_a, None)
    b, why_b = numbers(table, "b", cfg.spec_b, cfg.map_b, None)
    threshold_b = cfg.threshold if cfg.threshold_b is None else cfg.threshold_b
    a_bin = above(a, cfg.threshold, cfg.flag_at).astype(float)
    b_bin = above(b, threshold_b, cfg.flag_at).astype(float)
    if cfg.flip_b:
        b = 1.0 - b
        b_bin = 1.0 - b_bin
    missing = [s.judge for n, s in (("a", cfg.spec_a), ("b", cfg.spec_b))
               if not judge_known(table, n, s)]
    undefined = (f"no judgments from {', '.join(repr(m) for m in missing)} in this run"
                 if missing else None)
    return Pairs(table, a, b, a_bin, b_bin, why_a, why_b, excluded_mask(table), undefined)


def pair_slices(pairs: Pairs, cfg: PairConfig) -> Iterator[tuple[str, np.ndarray, np.ndarray,
                                                                 dict[str, Any]]]:
    """Per slice: label, all record indices, paired indices and the denominators."""
    for label, idx in index_slices(pairs.table, list(cfg.slice_by)):
        both = pairs.paired(idx, cfg.include_excluded)
        considered = idx if cfg.include_excluded else idx[~pairs.excluded[idx]]
        counts = row_counts(idx, pairs.excluded, considered, both)
        info: dict[str, Any] = {"a": cfg.judge_a, "b": cfg.b_name, "n_pairs": len(both)}
        if cfg.include_excluded:
            info["n_filtered"] = int(pairs.excluded[idx].sum())
        unusable = {"a": reasons(pairs.why_a, _mask(pairs, considered)),
                    "b": reasons(pairs.why_b, _mask(pairs, considered))}
        if unusable["a"] or unusable["b"]:
            info["unusable"] = unusable
        yield label, idx, both, {"counts": counts, "info": info}


def _mask(pairs: Pairs, idx: np.ndarray) -> np.ndarray:
    mask = np.zeros(len(pairs.a), dtype=bool)
    mask[idx] = True
    return mask
