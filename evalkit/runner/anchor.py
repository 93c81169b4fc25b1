"""``runner.anchor=FILE``: an anchor set, re-judged in every run so a judge's drift shows.

The file is JSON lines: each a record (``record_id``, ``input``, ``output``, ``context``,
``reference``, ...) with ``anchor``: its frozen reference judgments, ``{JUDGE: {"value": x}}``
or ``{JUDGE: {"passed": true}}``. At the end of the run each judge named there judges the
anchor records again, without the response cache (a cached answer would hide a model that
changed behind the same name), and the metric row ``anchor.JUDGE.drift`` says how far it
moved: the mean change of the value, or the share of verdicts that differ from the frozen
ones, with its interval. Alerts can watch it like any metric. The new judgments are kept in
``anchor.parquet`` beside the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.config import PluginInstance, RunConfig
from evalkit.errors import ConfigError
from evalkit.plugin import Judge, Produces

__all__ = ["ANCHOR_FILE", "PRODUCES", "anchor_rows", "read_anchor"]

ANCHOR_FILE = "anchor.parquet"
PRODUCES = Produces((), ("anchor.",), slice_by=())
"""What an anchor set adds to the metrics table, for the alerts' check."""
MAX_LINES = 100_000


def read_anchor(path: str, judges: list[str]) -> tuple[list[dict[str, Any]],
                                                       dict[str, dict[str, dict[str, Any]]]]:
    """The anchor records and, per judge, record id -> frozen judgment; one-line errors
    naming the file, line and fix."""
    from evalkit.results.schemas import RECORDS

    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"runner.anchor: no file {file}; give a JSON-lines file of records "
                          "with their frozen judgments under 'anchor'")
    records: list[dict[str, Any]] = []
    frozen: dict[str, dict[str, dict[str, Any]]] = {}
    with file.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if n > MAX_LINES:
                raise ConfigError(f"runner.anchor: {file} has more than {MAX_LINES} lines; an "
                                  "anchor set is a small frozen sample")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"runner.anchor: {file}:{n}: not JSON ({exc.msg})") from None
            refs = row.pop("anchor", None) if isinstance(row, dict) else None
            if not isinstance(refs, dict) or not isinstance(row.get("record_id"), str):
                raise ConfigError(f"runner.anchor: {file}:{n}: needs a string 'record_id' and "
                                  "'anchor': {JUDGE: {value|passed: ...}}")
            unknown = [k for k in row if k not in RECORDS.names]
            if unknown:
                raise ConfigError(f"runner.anchor: {file}:{n}: {unknown} are not record "
                                  f"columns; record columns: {', '.join(RECORDS.names)}")
            for judge, ref in refs.items():
                if judge not in judges:
                    raise ConfigError(f"runner.anchor: {file}:{n}: '{judge}' is not a judge of "
                                      f"this run; judges: {', '.join(judges) or 'none'}")
                if not isinstance(ref, dict) or not ({"value", "passed"} & set(ref)):
                    raise ConfigError(f"runner.anchor: {file}:{n}: anchor.{judge} needs "
                                      "'value' or 'passed'")
                frozen.setdefault(judge, {})[row["record_id"]] = ref
            records.append({**row, "source": "anchor"})
    if not records:
        raise ConfigError(f"runner.anchor: {file} holds no record")
    return records, frozen


def _uncached(plugin: Judge) -> Judge:
    make = getattr(plugin, "uncached", None)
    return make() if make is not None else plugin


def anchor_rows(rc: RunConfig, judges: list[tuple[PluginInstance, Judge]], run_id: str,
                run_dir: Path, confidence: float = 0.95, n_boot: int = 1000
                ) -> list[dict[str, Any]]:
    """Judge the anchor set again; write ``anchor.parquet``; one metric row per judge."""
    from evalkit.metrics._stats import mean_ci, wilson_ci
    from evalkit.results.schemas import RECORDS, conform
    from evalkit.results.writer import write_parquet
    from evalkit.runner.judging import JudgeRunner

    names = [inst.name for inst, _ in judges]
    records, frozen = read_anchor(str(rc.runner.anchor), names)
    chosen = [(inst, _uncached(p)) for inst, p in judges if inst.name in frozen]
    parts = JudgeRunner(chosen, run_id, False).run(conform(records, RECORDS,
                                                           {"run_id": run_id}))
    judged = pa.concat_tables(parts) if parts else None
    if judged is not None:
        write_parquet(judged, run_dir / ANCHOR_FILE)
    now: dict[tuple[str, str], dict[str, Any]] = {
        (r["judge"], r["record_id"]): r for r in (judged.to_pylist() if judged else [])}
    rows = []
    for judge, refs in frozen.items():
        by_value = all("value" in r for r in refs.values())
        diffs = []
        unscored = 0
        for rid, ref in refs.items():
            cur = now.get((judge, rid))
            key = "value" if by_value else "passed"
            if cur is None or cur["status"] != "ok" or cur.get(key) is None:
                unscored += 1
                continue
            diffs.append(cur[key] - ref[key] if by_value else float(cur[key] != ref[key]))
        d = np.array(diffs, dtype=float)
        value, ci, method, mc = None, (None, None), None, None
        if len(d) and by_value:
            value = float(d.mean())
            found = mean_ci(d, n_boot, 0, confidence)
            lo, hi, method = found
            ci, mc = (lo, hi), getattr(found, "mc_error", None)
        elif len(d):
            value = float(d.mean())
            ci, method = wilson_ci(int(d.sum()), len(d), confidence), "wilson"
        what = ("mean change of the judge's value on the anchor set since it was frozen"
                if by_value else "share of anchor records whose verdict differs from the "
                "frozen one")
        details = {"what": what, "ci_method": method, "anchor": str(rc.runner.anchor)}
        if value is None:
            details["undefined"] = "no anchor record judged usably"
        elif mc is not None:
            details["mc_error"] = mc  # the bootstrap's bounds, as a metric row says it
        rows.append({"metric": f"anchor.{judge}.drift", "plugin": "anchor", "slice": "all",
                     "value": value, "ci_low": ci[0], "ci_high": ci[1],
                     "n_attempted": len(refs), "n_excluded": 0, "n_judged": len(d),
                     "n_unscored": unscored, "higher_is_better": None, "details": details})
    return rows
