import pytest

from evalkit.config import validate_dataclass
from evalkit.errors import ConfigError
from evalkit.filters.sql import SqlConfig, SqlFilter


def rows():
    return [{"latency_s": 2.0, "model": "gpt-4o-mini"}, {"latency_s": 0.5, "model": "llama"},
            {"model": "gpt-4o"}, {"latency_s": 40.0, "model": "Ünï ✓"}]


def test_predicate_marks_matching_rows_in_order(batch):
    f = SqlFilter("slow", SqlConfig(where="latency_s > 1"), None)
    assert f.mark(batch(rows())).to_pylist() == \
        ["matches latency_s > 1", None, None, "matches latency_s > 1"]


def test_keep_mode_sets_aside_nulls_and_non_matches(batch):
    f = SqlFilter("fast", SqlConfig(where="latency_s <= 1", keep=True, reason="too slow"), None)
    assert f.mark(batch(rows())).to_pylist() == ["too slow", None, "too slow", "too slow"]


def test_functions_and_order_over_many_batches(batch):
    f = SqlFilter("gpt", SqlConfig(where="model LIKE 'gpt%'"), None)
    for _ in range(3):  # the connection is reused batch after batch
        big = batch([{"model": "gpt" if i % 2 else "other"} for i in range(5000)])
        out = f.mark(big).to_pylist()
        assert all((o is not None) == (i % 2 == 1) for i, o in enumerate(out))


@pytest.mark.parametrize("where, message", [
    ("no_such_column > 1", "not a valid predicate.*no_such_column"),
    ("latency_s >", "not a valid predicate"),
])
def test_bad_predicate_is_a_config_error(where, message):
    with pytest.raises(ConfigError, match=message):
        validate_dataclass(SqlConfig, {"where": where}, "filters.sql", "filter plugin 'sql'")


def test_where_is_required():
    with pytest.raises(ConfigError, match=r"filters.sql.where: required"):
        validate_dataclass(SqlConfig, {}, "filters.sql", "filter plugin 'sql'")
