"""``runner.baseline=RUN``: at the end of a run, compare it with its baseline (the maths of
:mod:`evalkit.comparison`), print the verdicts, keep them beside the run as
``comparison.parquet`` (one row per metric row) and ``flips.parquet`` (the records that
flipped), and fail the run (exit 5) when one of its ``gates`` fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.config import RunConfig
from evalkit.errors import ConfigError, RegressionFound
from evalkit.safetext import visible

__all__ = ["COMPARISON_FILE", "FLIPS_FILE", "check_baseline", "find_baseline"]

COMPARISON_FILE = "comparison.parquet"
FLIPS_FILE = "flips.parquet"


def find_baseline(rc: RunConfig) -> Path | None:
    """The baseline's run directory (checked before the run starts), or None."""
    if not rc.runner.baseline or rc.runner.dry_run:
        return None
    from evalkit.commands._runs import find_run
    from evalkit.results.storage import is_remote

    if is_remote(rc.runner.runs_dir):
        raise ConfigError("runner.baseline: needs a local runner.runs_dir (the comparison "
                          "reads both runs' files)")
    return find_run(rc.runner.baseline, Path(rc.runner.runs_dir), "runner.baseline")


def check_baseline(rc: RunConfig, baseline: Path, run_dir: Path) -> Any:
    """Compare ``run_dir`` with ``baseline`` under the run's gates; write the two tables;
    raise :class:`RegressionFound` when a gate failed."""
    from evalkit.comparison import compare_runs
    from evalkit.results.writer import write_parquet

    result = compare_runs(baseline, run_dir, gates=list(rc.gates))
    write_parquet(pa.Table.from_pylist(result.rows), run_dir / COMPARISON_FILE)
    write_parquet(pa.Table.from_pylist(result.flips, schema=_FLIPS), run_dir / FLIPS_FILE)
    print(visible(f"against baseline {baseline.name}: {result.summary()}; "
                  f"{len(result.flips)} records flipped ({FLIPS_FILE})"))
    for gate in result.gates:
        print(visible(f"gate {gate['gate']}: {gate['verdict']}"))
    if result.failed_gates:
        raise RegressionFound(f"{len(result.failed_gates)} gate(s) failed against baseline "
                              f"{baseline.name}: "
                              + "; ".join(g["gate"] for g in result.failed_gates))
    return result


_FLIPS = pa.schema([("metric", pa.string()), ("slice", pa.string()), ("record_id", pa.string()),
                    ("a", pa.float64()), ("b", pa.float64()), ("change", pa.string()),
                    ("same_output", pa.bool_())])
