"""``failure_recovery``: in a shadow run (``generate:`` with ``replay_failed: true``), of the
records whose recorded call a filter set aside as a failed pipeline, the share whose
candidate produced an output that no filter set aside: "would the candidate have succeeded
where production failed?". A proportion with Wilson's interval, by slice of the recorded
record's columns. A failed record that held nothing to ask the candidate (no input: a trace
recorded without its content) is left out of the share and counted (``n_unscored``,
``details.unreplayable``). Null, with the reason, when no failed record was replayed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.generate.messages import UNREPLAYABLE
from evalkit.metrics._stats import check_slice_by, slice_sql, wilson_ci
from evalkit.plugin import Metric, Produces

__all__ = ["FailureRecoveryMetric"]


@dataclass(frozen=True)
class FailureRecoveryConfig:
    failed_by: str = "pipeline_failure"  # the filter whose marks on recorded records count
    slice_by: list[str] = field(default_factory=list)  # record columns to break it down by
    confidence: float = 0.95  # of the Wilson interval

    def validate(self) -> None:
        check_slice_by(list(self.slice_by))


class FailureRecoveryMetric(Metric):
    """The share of failed recorded calls the candidate answered."""

    Config = FailureRecoveryConfig
    higher_is_better = True
    thread_safe = True

    def produces(self) -> Produces:
        return Produces((self.name,), slice_by=tuple(self.config.slice_by))

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        cols = ", ".join(slice_sql(c, "r") for c in cfg.slice_by)
        # a candidate that could not be asked (nothing replayable) says nothing of recovery
        unasked = ("coalesce(json_extract_string(c.metadata, '$.generate.cause') = "
                   f"'{UNREPLAYABLE}', false)")
        rows = con.execute(
            f"SELECT c.excluded_by IS NULL AS recovered, {unasked} AS unasked"
            + (f", {cols}" if cols else "") +
            " FROM records r JOIN records c ON c.record_id = r.record_id || '::candidate' "
            "WHERE r.side = 'recorded' AND c.side = 'candidate' AND r.excluded_by = ?",
            [cfg.failed_by]).fetchall()
        out = []
        groups: dict[str, list[tuple[bool, bool]]] = {
            "all": [(bool(r[0]), bool(r[1])) for r in rows]}
        for i, col in enumerate(cfg.slice_by, start=2):
            for row in rows:
                value = "null" if row[i] is None else row[i]
                groups.setdefault(f"{col}={value}", []).append((bool(row[0]), bool(row[1])))
        for label, pairs in groups.items():
            recovered = [ok for ok, unasked in pairs if not unasked]
            n, k, skipped = len(recovered), sum(recovered), len(pairs) - len(recovered)
            base = {"metric": self.name, "slice": label, "n_attempted": len(pairs),
                    "n_excluded": 0, "n_judged": n, "n_unscored": skipped}
            if n == 0:
                why = (f"none of the {skipped} failed record(s) replayed held anything to ask "
                       "the candidate (no input: recorded without content?)" if skipped else
                       f"no record set aside by {cfg.failed_by} was replayed: set "
                       "generate.replay_failed=true")
                out.append({**base, "value": None, "ci_low": None, "ci_high": None,
                            "details": {"undefined": why, "unreplayable": skipped}})
                continue
            low, high = wilson_ci(k, n, cfg.confidence)
            out.append({**base, "value": k / n, "ci_low": low, "ci_high": high,
                        "details": {"recovered": k, "failed": n, "unreplayable": skipped,
                                    "method": "wilson"}})
        return out
