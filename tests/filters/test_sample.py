import pytest

from evalkit.config import validate_dataclass
from evalkit.errors import ConfigError
from evalkit.filters.sample import SampleConfig, SampleFilter


def kept(batch, ids, **cfg):
    f = SampleFilter("s", SampleConfig(**cfg), None)
    marks = f.mark(batch([{"record_id": i} for i in ids])).to_pylist()
    return {i for i, m in zip(ids, marks, strict=True) if m is None}


def test_fraction_is_roughly_respected(batch):
    ids = [f"id-{i}" for i in range(20_000)]
    assert 0.09 < len(kept(batch, ids, fraction=0.1)) / len(ids) < 0.11


def test_deterministic_and_independent_of_batching_and_order(batch):
    ids = [f"id-{i}" for i in range(2000)]
    whole = kept(batch, ids, fraction=0.3, seed=7)
    parts = kept(batch, ids[:500], fraction=0.3, seed=7) | kept(
        batch, list(reversed(ids[500:])), fraction=0.3, seed=7)
    assert whole == parts
    assert whole != kept(batch, ids, fraction=0.3, seed=8)


def test_fraction_one_keeps_everything_with_an_id(batch):
    f = SampleFilter("s", SampleConfig(fraction=1.0), None)
    out = f.mark(batch([{"record_id": "a"}, {"record_id": "ü✓"}])).to_pylist()
    assert out == [None, None]


def test_reason_names_fraction_and_seed(batch):
    f = SampleFilter("s", SampleConfig(fraction=0.000001, seed=3), None)
    assert f.mark(batch([{"record_id": "a"}])).to_pylist() == ["not in the 1e-06 sample (seed 3)"]


@pytest.mark.parametrize("fraction", [0, 1.5, -0.1])
def test_bad_fraction(fraction):
    with pytest.raises(ConfigError, match="fraction"):
        validate_dataclass(SampleConfig, {"fraction": fraction}, "filters.s", "filter")
