"""edit_rate and bypass_rate: user actions, the edit distance to the final text, and the
Levenshtein implementation against a plain dynamic programme."""

from __future__ import annotations

import random

import pytest

from evalkit.metrics.user_actions import (
    BypassRateMetric,
    EditConfig,
    EditRateConfig,
    EditRateMetric,
    edit_distance,
    normalised_edit_distance,
)
from tests.metrics.run_tables import by_metric, connect


def reference_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_edit_distance_matches_the_plain_programme():
    rng = random.Random(0)
    for _ in range(300):
        a = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 15)))
        b = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 15)))
        assert edit_distance(a, b) == reference_distance(a, b), (a, b)
    assert edit_distance("kitten", "sitting") == 3
    assert normalised_edit_distance("", "") == 0.0
    assert normalised_edit_distance("abc", "") == 1.0


ACTIONS = [{"record_id": "1", "user_action": "accepted"},
           {"record_id": "2", "user_action": "edited"},
           {"record_id": "3", "user_action": "Bypassed"},
           {"record_id": "4", "user_action": "edited"},
           {"record_id": "5", "user_action": None},
           {"record_id": "6", "user_action": "ignored"},
           {"record_id": "7", "user_action": "accepted", "excluded_by": "f"}]


def rates(records, **kw):
    edit_cfg = EditRateConfig(**{"n_boot": 0, **kw})
    bypass_cfg = EditConfig(**{"n_boot": 0, **{k: v for k, v in kw.items() if k != "among"}})
    edit_cfg.validate()
    con = connect(records)
    return (by_metric(EditRateMetric("edit", edit_cfg, None).compute(con))["edit"],
            by_metric(BypassRateMetric("bypass", bypass_cfg, None).compute(con))["bypass"])


def test_rates_from_user_actions():
    edit, bypass = rates(ACTIONS)
    assert edit["value"] == pytest.approx(2 / 3)  # of accepted + edited
    assert edit["details"]["actions"] == {"accepted": 1, "edited": 2, "bypassed": 1}
    assert (edit["n_judged"], edit["n_unscored"], edit["n_excluded"]) == (3, 3, 1)
    assert bypass["value"] == pytest.approx(1 / 4)
    assert (bypass["n_judged"], bypass["n_unscored"]) == (4, 2)
    assert any("ignored" in k for k in bypass["details"]["unscored"])
    all_edit, _ = rates(ACTIONS, among="all")
    assert all_edit["value"] == pytest.approx(2 / 4)


def test_final_output_decides_edited_by_distance():
    records = [
        # a trailing space is not an edit, whatever the logged action says
        {"record_id": "1", "output": "The flight is booked.", "final_output":
         "The flight is booked. ", "user_action": "edited"},
        # a rewrite is an edit even with no logged action
        {"record_id": "2", "output": "The flight is booked.", "final_output":
         "Your train leaves at noon."},
        # bypassed stays bypassed
        {"record_id": "3", "output": "x", "final_output": "something else",
         "user_action": "bypassed"},
    ]
    edit, bypass = rates(records, edit_threshold=0.1)
    assert edit["details"]["actions"] == {"accepted": 1, "edited": 1, "bypassed": 1}
    assert edit["details"]["actions_changed_by_final_output"] == 1
    assert edit["value"] == 0.5 and bypass["value"] == pytest.approx(1 / 3)
    logged_only, _ = rates(records, use_final_output=False)
    assert logged_only["details"]["actions"] == {"accepted": 0, "edited": 1, "bypassed": 1}


def test_empty_and_all_unknown():
    edit, bypass = rates([])
    assert edit["value"] is None and bypass["value"] is None
    edit, _ = rates([{"record_id": "1"}])
    assert edit["value"] is None and edit["n_unscored"] == 1


def test_config_errors():
    with pytest.raises(ValueError, match="edit_threshold"):
        EditConfig(edit_threshold=1.5).validate()
    with pytest.raises(ValueError, match="among"):
        EditRateConfig(among="some").validate()
