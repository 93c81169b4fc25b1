"""A runs directory with one finished run built from plain rows (no evalkit run): 400
records, a judge ``j`` whose score tracks a hidden human truth, shared by the labels tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import write_parquet

N = 400


@dataclass
class LabelledRuns:
    root: Path  # the runs directory (copy it before writing labels into it)
    run_dir: Path
    truth: dict[str, float]  # record_id -> the human label
    score: dict[str, float]  # record_id -> the judge's value


def write_run(root: Path, run_id: str, truth: np.ndarray, score: np.ndarray,
              models: list[str], config: dict | None = None, system: str = "") -> Path:
    run_dir = root / "exp" / run_id
    (run_dir / "judgments").mkdir(parents=True)
    ids = [f"r{i:04d}" for i in range(len(truth))]
    write_parquet(conform([{"run_id": run_id, "record_id": r, "model": m, "input": f"q {r}",
                            "output": f"answer {r}{system}", "context": [f"passage {r}"],
                            "human_label": str(int(t)) if i % 4 else None}
                           for i, (r, m, t) in enumerate(zip(ids, models, truth, strict=True))],
                          RECORDS),
                  run_dir / "records.parquet")
    write_parquet(conform([{"run_id": run_id, "record_id": r, "judge": "j", "value": float(s),
                            "status": "ok", "origin": "computed", "explanation": "why"}
                           for r, s in zip(ids, score, strict=True)]
                          + [{"run_id": run_id, "record_id": r, "judge": "ann", "status": "ok",
                              "value": float(t), "origin": "imported"}
                             for r, t in zip(ids, truth, strict=True)], JUDGMENTS),
                  run_dir / "judgments" / "part-00000.parquet")
    (run_dir / "manifest.json").write_text(json.dumps({
        "run_id": run_id, "experiment": "exp", "status": "ok",
        "finished_at": "2026-11-27T00:00:00+00:00", "config": config or {}}))
    return run_dir


@pytest.fixture(scope="session")
def labelled_runs(tmp_path_factory: pytest.TempPathFactory) -> LabelledRuns:
    rng = np.random.default_rng(31)
    truth = (rng.random(N) < 0.3).astype(float)
    score = np.clip(0.55 * truth + rng.normal(0.25, 0.2, N), 0, 1).round(3)
    models = ["a" if i % 2 else "b" for i in range(N)]
    root = tmp_path_factory.mktemp("labelled") / "runs"
    run_dir = write_run(root, "run1", truth, score, models)
    ids = [f"r{i:04d}" for i in range(N)]
    return LabelledRuns(root, run_dir, dict(zip(ids, truth, strict=True)),
                        dict(zip(ids, score, strict=True)))
