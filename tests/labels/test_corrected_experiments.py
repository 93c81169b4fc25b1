"""The judge_agreement experiment corrects its judge with bundled labels: the corrected rate
is in the metrics, the summary puts it beside the judge's, an alert can gate on it, and the
report shows it (the audit's correction: tests/runner/test_audit_e2e.py)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from evalkit.report._data import Limits, load_run
from evalkit.report._page import _corrected
from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e


def _rows(run_dir, name):
    return {r["metric"]: r for r in pq.read_table(run_dir / "metrics.parquet").to_pylist()
            if r["slice"] == "all" and r["metric"].startswith(name)}


def test_judge_agreement_corrects_words_and_an_alert_gates_on_it(tmp_path):
    proc = run_cli("run", "+experiment=judge_agreement", "runner.fail_on=error",
                   "alerts=[{metric:words_corrected,operator:'>',value:0.5,severity:error,"
                   "message:corrected rate over half}]", cwd=tmp_path, check=False)
    assert proc.returncode == 3, proc.stderr
    assert "corrected words_corrected: 0.706 [0.577, 0.836] (ppi++, 30 labels of 300) · " \
           "judge alone 0.45" in proc.stdout
    (run_dir,) = run_dirs(tmp_path, "judge_agreement")
    rows = _rows(run_dir, "words_corrected")
    import json

    details = json.loads(rows["words_corrected"]["details"])
    assert details["method"] == "ppi++" and details["n_labelled"] == 30
    assert details["labels_file"] == "begin_wow_labels.jsonl"
    truth = 188 / 300  # every BEGIN record's annotators' label
    assert rows["words_corrected"]["ci_low"] <= truth <= rows["words_corrected"]["ci_high"]
    assert not rows["words_corrected.judge"]["ci_low"] <= truth <= \
        rows["words_corrected.judge"]["ci_high"]
    html = _corrected(load_run(run_dir, Limits(max_records=10)))
    assert 'data-metric="words_corrected"' in html and "ppi++" in html
