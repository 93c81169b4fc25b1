import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.metrics.crosstab import CrosstabConfig, CrosstabMetric
from tests.metrics.run_tables import rows_by
from tests.metrics.run_tables import run_dir_connection as connect

# 6 ERROR records (all flagged), 4 DEFAULT (1 flagged), 1 DEFAULT with no verdict
RECS = [{"record_id": str(i), "level": "ERROR" if i < 6 else "DEFAULT",
         "model": "small" if i % 2 else "large",
         "excluded_by": "pf" if i < 6 else None} for i in range(11)]
HALL = [{"record_id": str(i), "judge": "H", "value": 0.9 if i < 7 else 0.1, "status": "ok"}
        for i in range(10)]
MODES = [{"record_id": str(i), "judge": "fm", "status": "ok",
          "label": "pipeline_failure" if i < 6 else "prompt_echo" if i == 6 else "undecided"}
         for i in range(11)]


def test_flag_by_level(tmp_path):
    con = connect(tmp_path, RECS, HALL + MODES)
    rows = rows_by(CrosstabMetric("x", CrosstabConfig(judge="H", by="level", threshold=0.5),
                                  None).compute(con))
    err = rows[("x.flagged", "level=ERROR")]
    # the crosstab counts excluded records (include_excluded): none is excluded from the
    # row, and details say how many a filter set aside; the counts add up
    assert err["value"] == 1.0 and err["details"]["count"] == 6 and err["n_excluded"] == 0
    assert err["details"]["n_filtered"] == 6
    for row in rows.values():
        assert row["n_attempted"] == row["n_excluded"] + row["n_judged"] + row["n_unscored"]
    default = rows[("x.flagged", "level=DEFAULT")]
    assert default["value"] == pytest.approx(1 / 4) and default["details"]["count"] == 1
    assert default["n_attempted"] == 5 and default["n_unscored"] == 1
    assert rows[("x.not_flagged", "all")]["details"]["count"] == 3
    assert rows[("x.flagged", "all")]["value"] == pytest.approx(7 / 10)
    lo, hi = rows[("x.flagged", "all")]["ci_low"], rows[("x.flagged", "all")]["ci_high"]
    assert lo <= 0.7 <= hi


def test_included_only(tmp_path):
    con = connect(tmp_path, RECS, HALL)
    rows = rows_by(CrosstabMetric("x", CrosstabConfig(judge="H", by="level", threshold=0.5,
                                                      include_excluded=False), None)
                   .compute(con))
    assert ("x.flagged", "level=ERROR") not in rows
    assert rows[("x.flagged", "all")]["n_attempted"] == 5


def test_labels_among_flagged_by_model(tmp_path):
    con = connect(tmp_path, RECS, HALL + MODES)
    rows = rows_by(CrosstabMetric("fm", CrosstabConfig(
        judge="fm", of="label", by="model", flagged_by="H", flagged_threshold=0.5), None)
        .compute(con))
    # flagged: records 0..6 -> 6 pipeline failures and one echo (record 6, 'large')
    assert rows[("fm.pipeline_failure", "all")]["details"]["count"] == 6
    assert rows[("fm.prompt_echo", "all")]["value"] == pytest.approx(1 / 7)
    assert rows[("fm.prompt_echo", "model=large")]["value"] == pytest.approx(1 / 4)
    assert rows[("fm.undecided", "all")]["details"]["count"] == 0
    assert rows[("fm.prompt_echo", "all")]["details"]["among"] == "records flagged by 'H'"


def test_unknown_judge_and_unicode_values(tmp_path):
    recs = [{"record_id": "1", "model": "modèle-ü"}, {"record_id": "2", "model": None}]
    judg = [{"record_id": "1", "judge": "P", "passed": False, "status": "ok"},
            {"record_id": "2", "judge": "P", "passed": True, "status": "ok"}]
    con = connect(tmp_path, recs, judg)
    rows = rows_by(CrosstabMetric("c", CrosstabConfig(judge="P", by="model"), None)
                   .compute(con))
    assert rows[("c.flagged", "model=modèle-ü")]["value"] == 1.0
    assert rows[("c.flagged", "model=null")]["value"] == 0.0
    none = CrosstabMetric("c", CrosstabConfig(judge="Q", by="model"), None).compute(con)
    assert none[0]["value"] is None and "no judgments" in none[0]["details"]["undefined"]


@pytest.mark.parametrize("cfg, message", [
    ({"judge": "H", "by": "nope"}, "by: 'nope' is not a record column"),
    ({"judge": "H", "by": "level", "of": "score"}, "of:"),
    ({"judge": "H", "by": "level", "of": "label", "threshold": 0.5}, "only used with of=flag"),
    ({"judge": "H", "by": "level", "flagged_threshold": 0.5}, "set flagged_by"),
])
def test_bad_config(cfg, message):
    with pytest.raises(ConfigError, match=message):
        instance("metrics", "x", {"plugin": "crosstab", **cfg}, "metrics.x")
