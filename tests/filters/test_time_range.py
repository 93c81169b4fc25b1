from datetime import datetime, timezone

import pytest

from evalkit.config import validate_dataclass
from evalkit.errors import ConfigError
from evalkit.filters.time_range import TimeRangeConfig, TimeRangeFilter


def ts(day, hour=0):
    return datetime(2026, 11, day, hour, tzinfo=timezone.utc)


def test_window_is_half_open_and_nulls_go(batch):
    f = TimeRangeFilter("t", TimeRangeConfig(start="2026-11-02", end="2026-11-03T00:00:00Z"),
                        None)
    rows = [{"timestamp": ts(1, 23)}, {"timestamp": ts(2)}, {"timestamp": ts(2, 23)},
            {"timestamp": ts(3)}, {}]
    assert f.mark(batch(rows)).to_pylist() == [
        "timestamp before 2026-11-02", None, None, "timestamp at or after 2026-11-03T00:00:00Z",
        "timestamp is null"]


def test_open_ended_and_keep_null(batch):
    f = TimeRangeFilter("t", TimeRangeConfig(start="2026-11-02", exclude_null=False), None)
    assert f.mark(batch([{"timestamp": ts(5)}, {}])).to_pylist() == [None, None]


@pytest.mark.parametrize("cfg, message", [
    ({}, "set start, end or both"),
    ({"start": "yesterday"}, "start: 'yesterday' is not an ISO-8601"),
    ({"start": "2026-11-03", "end": "2026-11-02"}, "must be before end"),
])
def test_bad_windows(cfg, message):
    with pytest.raises(ConfigError, match=message):
        validate_dataclass(TimeRangeConfig, cfg, "filters.t", "filter")
