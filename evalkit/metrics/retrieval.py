"""``context_precision`` and ``context_recall``: how good the retrieval behind an answer was,
from relevance labels carried by the records or from a judge over the retrieved passages.

- precision: of the retrieved passages (``records.context``, in rank order), how many are
  relevant; rank-aware by default (average precision, as RAGAS: Σ_k precision@k·rel_k / Σ_k
  rel_k), so relevant passages ranked low count less. Labels: a list aligned with
  ``context`` at a metadata path (1/0, true/false, or graded scores with ``threshold``), or a
  judge whose ``details.relevance`` holds that list.
- recall: of the passages relevant to the query, how many were retrieved: the ids of the
  relevant ones at a metadata path against the retrieved ids (1-based positions' ids from
  ``ids``), or a judge whose ``value`` is the recall (e.g. the share of reference claims the
  context supports)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.analysis.ranking import average_precision
from evalkit.checks import check_flag_at
from evalkit.metrics._signals import (
    SignalSpec,
    SliceConfig,
    above,
    excluded_mask,
    fetch,
    index_slices,
    mean_row,
    metadata_value,
    parse_spec,
    passage_ids,
    reasons,
)
from evalkit.paths import value_at
from evalkit.plugin import Metric

__all__ = [
    "ContextPrecisionConfig", "ContextPrecisionMetric", "ContextRecallConfig",
    "ContextRecallMetric",
]


def _check_source(value: str, key: str) -> None:
    if value.startswith("judge:"):
        parse_spec(value, key)
    elif not value.startswith("metadata."):
        raise ValueError(f"{key}: {value!r} is neither metadata.<path> nor judge:NAME")


@dataclass(frozen=True)
class ContextPrecisionConfig(SliceConfig):
    relevance: str = "metadata.relevance"  # per-passage labels: metadata.<path> or judge:NAME
    threshold: float = 0.5  # a label > threshold is relevant (flag_at; true = 1)
    flag_at: str = ">"  # a score at the threshold: ">" not relevant, ">=" relevant
    rank_aware: bool = True  # average precision over ranks; false: relevant / retrieved
    k: int | None = None  # only the first k retrieved passages (null: all)

    def validate(self) -> None:
        super().validate()
        _check_source(self.relevance, "relevance")
        check_flag_at(self.flag_at)
        if self.k is not None and self.k < 1:
            raise ValueError("k: must be at least 1 (or null for every passage)")


def _labels(raw: Any, n_passages: int, threshold: float, flag_at: str) -> np.ndarray | str:
    if not isinstance(raw, list):
        return "no relevance labels"
    if len(raw) != n_passages:
        return f"{len(raw)} relevance labels for {n_passages} passages"
    out = []
    for v in raw:
        if isinstance(v, bool):
            out.append(float(v))
        elif isinstance(v, (int, float)):
            out.append(1.0 if above(v, threshold, flag_at) else 0.0)
        else:
            return f"relevance label {str(v)[:20]!r} is not a number or boolean"
    return np.array(out)


class ContextPrecisionMetric(Metric):
    """Mean per-record context precision over included records with retrieved passages and
    their relevance labels; records without them are unscored, with reasons."""

    Config = ContextPrecisionConfig
    higher_is_better = True
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: ContextPrecisionConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        judge = cfg.relevance.startswith("judge:")
        specs = {"j": parse_spec(cfg.relevance, "relevance")} if judge else {}
        table = fetch(con, specs, ["context", "metadata", *cfg.slice_by], {"j": ["details"]})
        contexts = table.column("context").to_pylist()
        metas = table.column("metadata").to_pylist()
        status = table.column("j__status").to_pylist() if judge else None
        details = table.column("j__details").to_pylist() if judge else None
        values = np.full(table.num_rows, np.nan)
        why: list[str | None] = [None] * table.num_rows
        for i, passages in enumerate(contexts):
            if not passages:
                why[i] = "no retrieved passages"
                continue
            if judge and status is not None and details is not None:
                if status[i] != "ok":
                    why[i] = f"judgment status {status[i] or 'missing'}"
                    continue
                raw = value_at(details[i], "relevance")
            else:
                raw = metadata_value(metas[i], cfg.relevance)
            labels = _labels(raw, len(passages), cfg.threshold, cfg.flag_at)
            if isinstance(labels, str):
                why[i] = labels
                continue
            if cfg.k is not None:
                labels = labels[:cfg.k]
            values[i] = average_precision(labels) if cfg.rank_aware else float(labels.mean())
        return _rows(self.name, table, values, why, cfg,
                     "rank-aware context precision (average precision)" if cfg.rank_aware
                     else "relevant retrieved passages / retrieved passages")


@dataclass(frozen=True)
class ContextRecallConfig(SliceConfig):
    relevant: str = "metadata.relevant_ids"  # ids of every relevant passage, or judge:NAME
    ids: str = "position"  # retrieved passages' ids: position (1-based) or metadata.<path>

    def validate(self) -> None:
        super().validate()
        _check_source(self.relevant, "relevant")
        if self.ids != "position" and not self.ids.startswith("metadata."):
            raise ValueError(f"ids: {self.ids!r} is neither position nor metadata.<path>")


class ContextRecallMetric(Metric):
    """Mean per-record context recall over included records that have relevant passages
    (or a judgment); a record with no relevant passage at all is unscored (recall is
    undefined there), not a perfect score."""

    Config = ContextRecallConfig
    higher_is_better = True
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: ContextRecallConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        judge = cfg.relevant.startswith("judge:")
        spec: SignalSpec | None = parse_spec(cfg.relevant, "relevant") if judge else None
        table = fetch(con, {"j": spec} if spec else {}, ["context", "metadata",
                                                          *cfg.slice_by])
        values = np.full(table.num_rows, np.nan)
        why: list[str | None] = [None] * table.num_rows
        if spec is not None:
            status = table.column("j__status").to_pylist()
            for i, v in enumerate(table.column("j").to_pylist()):
                if status[i] != "ok":
                    why[i] = f"judgment status {status[i] or 'missing'}"
                elif not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                    why[i] = f"judge value {v!r} is not a recall in [0, 1]"
                else:
                    values[i] = float(v)
        else:
            contexts = table.column("context").to_pylist()
            metas = table.column("metadata").to_pylist()
            for i, (passages, meta) in enumerate(zip(contexts, metas, strict=True)):
                relevant = metadata_value(meta, cfg.relevant)
                if not isinstance(relevant, list):
                    why[i] = f"no list at {cfg.relevant}"
                    continue
                if not relevant:
                    why[i] = "no relevant passage exists for this query (recall undefined)"
                    continue
                retrieved = passage_ids(passages, meta, cfg.ids)
                if retrieved is None:
                    why[i] = f"no list of retrieved ids at {cfg.ids}"
                    continue
                wanted = {str(x) for x in relevant}
                values[i] = len(wanted & retrieved) / len(wanted)
        return _rows(self.name, table, values, why, cfg,
                     "relevant passages retrieved / relevant passages")


def _rows(name: str, table: Any, values: np.ndarray, why: list[str | None],
          cfg: SliceConfig, what: str) -> list[dict[str, Any]]:
    excluded = excluded_mask(table)
    rows = []
    for label, idx in index_slices(table, list(cfg.slice_by)):
        inc = idx[~excluded[idx]]
        details: dict[str, Any] = {"what": what}
        unusable = reasons([why[i] for i in inc])
        if unusable:
            details["unscored_reasons"] = unusable
        rows.append(mean_row(name, label, idx, values, excluded, cfg, details))
    return rows
