"""``span_breakdown``: spans counted by type and name, with error rates."""

import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.metrics.span_breakdown import SpanBreakdownConfig, SpanBreakdownMetric
from tests.metrics.run_tables import connect, rows_by


def spans(*items):
    return {"spans": [{"type": t, "name": n, "error": e} for t, n, e in items]}


RECS = [
    {"record_id": "a", "metadata": spans(("llm", "chat gpt-4o", False))},
    {"record_id": "b", "metadata": spans(("llm", "chat gpt-4o", True))},
    {"record_id": "c", "excluded_by": "non_genai_span",
     "metadata": spans(("tool", "execute_tool search", True))},
    {"record_id": "d", "metadata": spans(("llm", "assistant", False), ("tool", "Bash", False),
                                         ("tool", "Bash", True))},
    {"record_id": "e", "metadata": {"other": 1}},
]


def test_counts_and_error_rates_by_type_and_name():
    rows = rows_by(SpanBreakdownMetric("s", SpanBreakdownConfig(), None).compute(connect(RECS)))
    assert rows[("s", "all")]["value"] == 6
    assert rows[("s.error_rate", "all")]["value"] == pytest.approx(3 / 6)
    assert rows[("s", "type=llm")]["value"] == 3
    assert rows[("s", "type=tool")]["details"]["errors"] == 2
    assert rows[("s", "span=llm/chat gpt-4o")]["value"] == 2
    assert rows[("s.error_rate", "span=tool/Bash")]["value"] == 0.5


def test_top_names_sums_the_rest_and_no_spans_is_undefined():
    rows = rows_by(SpanBreakdownMetric("s", SpanBreakdownConfig(by=["name"], top_names=1),
                                       None).compute(connect(RECS)))
    assert [k[1] for k in rows if k[0] == "s"] == ["all", "span=llm/chat gpt-4o",
                                                   "span=(other names)"]
    assert rows[("s", "span=(other names)")]["value"] == 4
    empty = rows_by(SpanBreakdownMetric("s", SpanBreakdownConfig(), None).compute(
        connect([{"record_id": "x"}])))
    assert empty[("s", "all")]["value"] is None


def test_bad_config():
    with pytest.raises(ConfigError, match="metrics.s.by"):
        instance("metrics", "s", {"plugin": "span_breakdown", "by": ["model"]}, "metrics.s")
