"""``runner.baseline=RUN`` with ``gates:``: a run compares itself with its baseline at the
end, keeps the verdicts and flips beside it, and fails (exit 5) on a gate's regression."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from evalkit.errors import ConfigError, RegressionFound

pytestmark = pytest.mark.e2e


def test_a_run_gates_itself_on_its_baseline(tmp_path, monkeypatch, capsys):
    import evalkit

    monkeypatch.chdir(tmp_path)
    common = ["source.limit=40", "runner.run_id={}", "~metrics.latency"]
    evalkit.run("quickstart", [o.format("A") for o in common])
    with pytest.raises(RegressionFound, match="echo_rate:\\+0.02") as failed:
        evalkit.run("quickstart", [o.format("C") for o in common] + [
            "runner.baseline=A", "judges.prompt_echo.threshold=0.1",
            "gates=[{metric: echo_rate, tolerance: 0.02}]"])
    assert "gate echo_rate:+0.02: FAIL" in capsys.readouterr().out
    assert failed.value.exit_code == 5
    run_c = tmp_path / "runs" / "quickstart" / "C"
    changes = pq.read_table(run_c / "flips.parquet").column("change").to_pylist()
    assert changes and set(changes) == {"regressed"}
    rows = pq.read_table(run_c / "comparison.parquet").to_pylist()
    assert any(r["metric"] == "echo_rate" and r["test"] == "mcnemar_exact" for r in rows)
    with pytest.raises(ConfigError, match="gates\\[0\\]"):
        evalkit.run("quickstart", ["gates=['echo_rate']"])
