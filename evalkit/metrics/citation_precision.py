"""``citation_precision``: of the citations in outputs, the share whose cited passage
supports the claim attributed to it.

Two checks, in order. Deterministic, always: a citation whose id names no passage of the
record's ``context`` cannot support anything (``<name>.id_valid`` reports this alone).
Semantic, by a judge: whether a passage that exists supports its claim is read from the
judgments of ``support_judge`` (an LLM judge), whose ``details`` must hold
``{"citations": [{"id": "2", "supported": true}, ...]}`` (entries for the same id match that
id's citations in order of appearance); a judge that returns only a ``value`` in [0, 1] is
read as the supported share of the record's valid citations. Without a support judge the
main value is undefined, not the id-level share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.analysis.citations import Citation, check_citation_settings, extract_citations
from evalkit.metrics._intervals import clustered_proportion_ci
from evalkit.metrics._signals import (
    SignalSpec,
    SliceConfig,
    excluded_mask,
    fetch,
    index_slices,
    metric_row,
    passage_ids,
)
from evalkit.paths import value_at
from evalkit.plugin import Metric

__all__ = ["CitationPrecisionConfig", "CitationPrecisionMetric"]


@dataclass(frozen=True)
class CitationPrecisionConfig(SliceConfig):
    pattern: str = r"\[([^\]]+)\]"  # regex of a citation; group 1: its id(s), e.g. [2] or [1, 3]
    ids: str = "position"  # position: ids are 1-based context indices; or metadata.<path>: id list
    support_judge: str | None = None  # judge whose details.citations say which are supported

    def validate(self) -> None:
        super().validate()
        check_citation_settings(self.pattern, self.ids)


def _supported(valid: list[Citation], status: str | None, value: float | None,
               details: str | None) -> float | None:
    """How many of the ``valid`` citations the support judge upheld (None: undecided)."""
    if not valid:
        return 0.0
    if status != "ok":
        return None
    verdicts: dict[str, list[bool]] = {}
    entries = value_at(details, "citations")
    if isinstance(entries, list):
        for e in entries:
            if isinstance(e, dict) and "id" in e and isinstance(e.get("supported"), bool):
                verdicts.setdefault(str(e["id"]), []).append(e["supported"])
        total = 0.0
        for c in valid:
            queue = verdicts.get(c.id)
            if not queue:
                return None
            total += queue.pop(0)
        return total
    if value is not None and 0.0 <= value <= 1.0:
        return value * len(valid)
    return None


class CitationPrecisionMetric(Metric):
    """Rows ``<name>`` (supported citations / all citations, over included records whose
    every citation is decided) and ``<name>.id_valid`` (citations naming an existing passage /
    all citations), per slice. Records without citations are counted, not scored."""

    Config = CitationPrecisionConfig
    higher_is_better = True
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: CitationPrecisionConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        specs = {}
        if cfg.support_judge:
            specs["s"] = SignalSpec(judge=cfg.support_judge)
        table = fetch(con, specs, ["output", "context", "metadata", *cfg.slice_by],
                      {"s": ["details"]})
        n = table.num_rows
        cited, valid_n, support = np.zeros(n), np.zeros(n), np.full(n, np.nan)
        problems: list[str | None] = [None] * n
        outputs = table.column("output").to_pylist()
        contexts = table.column("context").to_pylist()
        metas = table.column("metadata").to_pylist()
        status = table.column("s__status").to_pylist() if specs else [None] * n
        values = table.column("s").to_pylist() if specs else [None] * n
        details = table.column("s__details").to_pylist() if specs else [None] * n
        for i in range(n):
            cites = extract_citations(outputs[i] or "", cfg.pattern)
            ids = passage_ids(contexts[i], metas[i], cfg.ids)
            if ids is None:
                problems[i] = f"{cfg.ids} is not a list of passage ids"
                continue
            valid = [c for c in cites if c.id in ids]
            cited[i], valid_n[i] = len(cites), len(valid)
            if cites:
                got = _supported(valid, status[i], values[i], details[i]) if specs else (
                    0.0 if not valid else None)
                support[i] = np.nan if got is None else got
        excluded = excluded_mask(table)
        rows = []
        for label, idx in index_slices(table, list(cfg.slice_by)):
            inc = idx[~excluded[idx]]
            bad_ids = [i for i in inc if problems[i]]
            # in canonical order of their counts: the sums (fractions of support) and so the
            # bits of the values and bounds do not depend on the records' order or ids
            with_cites = _in_order(inc[cited[inc] > 0], valid_n, cited)
            decided = _in_order(with_cites[~np.isnan(support[with_cites])], support, cited)
            base = {"n_citations": int(cited[inc].sum()), "n_valid_ids": int(valid_n[inc].sum()),
                    "n_records_without_citations": int((cited[inc] == 0).sum()) - len(bad_ids),
                    "ids": cfg.ids, "support_judge": cfg.support_judge}
            if bad_ids:
                base["n_records_ids_unknown"] = len(bad_ids)
            if cfg.n_boot > 0:
                base["ci_method"] = "wilson (effective n)"
            counts = {"n_attempted": len(idx), "n_excluded": int(excluded[idx].sum())}
            undefined = None
            if not cfg.support_judge:
                undefined = ("support not checked: set support_judge to a judge that says "
                             "which citations their passage supports (only id_valid is "
                             "deterministic)")
            elif len(with_cites) and not len(decided):
                undefined = f"judge '{cfg.support_judge}' decided no record's citations"
            value = (float(support[decided].sum() / cited[decided].sum())
                     if len(decided) and not undefined else None)
            # a proportion of citations clustered in records: Wilson's interval at the
            # ratio's effective sample size (the bootstrap over records gave [1, 1] at 1)
            ci = clustered_proportion_ci(support[decided], cited[decided], cfg.confidence) \
                if value is not None and cfg.n_boot > 0 else (None, None)
            rows.append(metric_row(self.name, label, value, ci, **counts,
                                   n_judged=len(decided),
                                   n_unscored=len(with_cites) - len(decided) + len(bad_ids),
                                   details={**base, "what": "supported citations / citations"},
                                   undefined=undefined or "no citation in this slice"))
            idv = (float(valid_n[with_cites].sum() / cited[with_cites].sum())
                   if len(with_cites) else None)
            ci = clustered_proportion_ci(valid_n[with_cites], cited[with_cites],
                                         cfg.confidence) \
                if idv is not None and cfg.n_boot > 0 else (None, None)
            rows.append(metric_row(f"{self.name}.id_valid", label, idv, ci, **counts,
                                   n_judged=len(with_cites), n_unscored=len(bad_ids),
                                   details={**base, "what": "citations naming an existing "
                                            "passage / citations (an upper bound of "
                                            "precision)"},
                                   undefined="no citation in this slice"))
        return rows


def _in_order(idx: np.ndarray, *by: np.ndarray) -> np.ndarray:
    """``idx`` sorted by the values ``by`` hold at it (first array first; NaN last)."""
    if len(idx) < 2:
        return idx
    return idx[np.lexsort(tuple(b[idx] for b in reversed(by)))]
