"""v4 pages decoded by msgspec into structs (mapping.typed_page_columns): the same columns as
orjson's parse mapped by observation_columns, or no answer (the page is then mapped from
orjson's parse, as before)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from fake_server import FakeLangfuse, _obs, make_dataset, parse

from evalkit.sources.langfuse import mapping
from evalkit.sources.langfuse import source as source_module
from tests.sources.langfuse.conftest import WINDOW, make_source, read_all
from tests.sources.langfuse.test_workers import _sorted


def _v2_page(objs: list[dict[str, Any]]) -> bytes:
    return json.dumps({"data": objs, "meta": {"cursor": "abc"}}).encode()


def _dict_columns(body: bytes, as_trace: bool) -> dict[str, Any] | None:
    """What the orjson path maps (None when it raises)."""
    try:
        return mapping.observation_columns(orjson.loads(body)["data"], as_trace)
    except (ValueError, TypeError, AttributeError, OverflowError):
        return None


def _same(typed: dict[str, Any], exact: dict[str, Any]) -> None:
    # repr tells 1 from 1.0 and True from 1
    assert typed.keys() == exact.keys()
    for col, values in exact.items():
        other = typed[col]
        if hasattr(values, "to_pylist"):
            assert other.equals(values), col
        else:
            assert repr(other) == repr(values), col


@pytest.mark.parametrize("as_trace", [False, True])
def test_the_fakes_pages_map_the_same_typed(as_trace: bool) -> None:
    server = FakeLangfuse("v4", validate=False)
    make_dataset(server, 40, *WINDOW)
    groups = set(mapping.V2_FIELDS.split(","))
    body = _v2_page([server.render_v2(o, groups, set()) for o in server.observations.values()])
    typed = mapping.typed_page_columns(body, as_trace)
    assert typed is not None
    _same(typed, mapping.observation_columns(orjson.loads(body)["data"], as_trace))


def _base() -> dict[str, Any]:
    t0 = parse("2026-05-01T10:00:00Z")
    obs = _obs("gen-1", "trace-1", "GENERATION", "llm-call", t0, t0, None, "q", "a", 1)
    obs["providedModelName"] = obs.pop("model")
    obs["latency"] = 0.25
    return obs


def _set(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda obs: obs.update(values)


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def drop(obs: dict[str, Any]) -> None:
        for key in keys:
            obs.pop(key, None)
    return drop


BIG = 123456789012345678901234567890  # beyond 64 bits: orjson reads a float, msgspec an int

# changes to one observation of a page the typed path maps (with the orjson path's columns)
TYPED = {
    "as sent": _set(),
    "v1 names the model": lambda o: o.update(model=o.pop("providedModelName")),
    "providedModelName null beats model": _set(providedModelName=None, model="m"),
    "latency an int": _set(latency=2),
    "latency a decimal string": _set(latency="0.5"),
    "latency a bool": _set(latency=True),
    "no latency: end - start": _drop("latency"),
    "latency beyond 64 bits": _set(latency=BIG),
    "cost without total: summed": _set(costDetails={"input": 1e-6, "output": 2}),
    "cost as decimal strings": _set(costDetails={"input": "0.1", "output": "0.2"}),
    "empty cost: totalCost": _set(costDetails={}, totalCost=0.5),
    "calculatedTotalCost": _set(costDetails=None, calculatedTotalCost="0.25"),
    "total beyond 64 bits": _set(costDetails={"total": BIG}),
    "v1 usage": lambda o: o.update(usage={"input": 3, "output": 4}, usageDetails={}),
    "tokens as floats": _set(usageDetails={"input": 3.0, "output": 4.5}),
    "tokens under other names": _set(usageDetails={"promptTokens": 3, "completion_tokens": 4}),
    "no optional keys": _drop("traceId", "endTime", "level", "tags", "metadata", "name",
                              "usageDetails", "costDetails", "providedModelName", "input"),
    "unknown keys skipped": _set(extraKey={"deep": [1, 2, {"x": None}]}, another=BIG),
    "unicode and escapes": _set(input="é\u2028😀\n\"", metadata={"k": "\x00é", "ü": [None]}),
    "metadata of every type": _set(metadata={"a": [1, 2.5, -0.0, True, None, "s"],
                                              "n": 18446744073709551615, "f": 1e300}),
    "a level of another type (Arrow rejects it later)": _set(level=5),
    "a start time Arrow refuses": _set(startTime="2026-05-01T10:00:00"),
    "duplicate key: the last wins": None,  # built below as text
}
# changes the typed path declines (the page is mapped from orjson's parse)
DECLINED = {
    "input an object": _set(input={"role": "user"}),
    "output a number": _set(output=5),
    "id a number": _set(id=5),
    "id empty": _set(id=""),
    "no id": _drop("id"),
    "an integer beyond 64 bits in metadata": _set(metadata={"n": BIG}),
    "one beyond 64 bits in modelParameters": _set(modelParameters={"seed": -BIG}),
    "a start time that is no string": _set(startTime=5),
}


def _page_with(change: Callable[[dict[str, Any]], None] | None) -> bytes:
    if change is None:
        return _v2_page([_base()]).replace(b'"latency": 0.25', b'"latency": 1, "latency": 0.25')
    obs = _base()
    change(obs)
    return _v2_page([_base(), obs])


@pytest.mark.parametrize("as_trace", [False, True])
@pytest.mark.parametrize("case", list(TYPED))
def test_odd_values_map_the_same_typed(case: str, as_trace: bool) -> None:
    body = _page_with(TYPED[case])
    exact = _dict_columns(body, as_trace)
    typed = mapping.typed_page_columns(body, as_trace)
    if exact is None:  # a root without a trace id
        assert as_trace and typed is None
        return
    assert typed is not None
    _same(typed, exact)


@pytest.mark.parametrize("case", list(DECLINED))
def test_what_the_typed_path_declines(case: str) -> None:
    assert mapping.typed_page_columns(_page_with(DECLINED[case])) is None


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"meta": {}}', b'{"data": null}',
                                  b'{"data": [5]}', b'{"data": [{"id": "a"}]} x',
                                  b'{"data": [{"id": "a", "input": "\\ud800"}]}',
                                  b'{"data": [{"id": "a", "metadata": 1e400}]}',
                                  b'{"data": [{"id": "a", "metadata": ' + b"[" * 2000 +
                                  b"]" * 2000 + b"}]}"])
def test_bodies_the_typed_path_declines(body: bytes) -> None:
    assert mapping.typed_page_columns(body) is None


def test_a_page_table_is_the_same_typed_or_not(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    source, _ = make_source(tmp_path, host="http://127.0.0.1:9", import_scores=False)
    reader = source_module._Reader(source, lambda item: None)
    body = _v2_page([_base(), {**_base(), "id": "gen-2", "metadata": {"n": BIG}}])
    good = _v2_page([_base(), {**_base(), "id": "gen-2", "costDetails": {"input": 1}}])
    typed = [reader.page_table(b) for b in (body, good)]
    assert reader._typed_table(body) is None and reader._typed_table(good) is not None
    monkeypatch.setattr(mapping, "typed_page_columns", lambda *args: None)
    assert [reader.page_table(b) for b in (body, good)] == typed


def test_reads_are_the_same_typed_or_not(fake_v4: FakeLangfuse, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = parse("2026-05-01T10:00:00Z")
    odd = _obs("gen-odd-0", "trace-00002", "GENERATION", "llm-call", t0, t0, None, "q", "a", 2)
    odd["metadata"] = {"n": BIG}  # its page is mapped from orjson's parse
    fake_v4.add_observation(odd)
    typed_pages = []
    typed = mapping.typed_page_columns

    def spy(body: bytes, as_trace: bool = False) -> dict[str, Any] | None:
        columns = typed(body, as_trace)
        typed_pages.append(columns is not None)
        return columns

    monkeypatch.setattr(mapping, "typed_page_columns", spy)
    for read in ("observations", "traces"):
        opts = {"workers": 0, "page_size": 9, "read": read}
        here = read_all(tmp_path / read / "typed", **opts)
        assert any(typed_pages) and not all(typed_pages)
        monkeypatch.setattr(mapping, "typed_page_columns", lambda *args: None)
        exact = read_all(tmp_path / read / "exact", **opts)
        monkeypatch.setattr(mapping, "typed_page_columns", spy)
        assert here.records.sort_by("record_id").equals(exact.records.sort_by("record_id"))
        assert _sorted(here.rejects) == _sorted(exact.rejects)
        assert _sorted(here.imported) == _sorted(exact.imported)
        assert here.fingerprint["stats"] == exact.fingerprint["stats"]
        typed_pages.clear()


def test_the_servers_key_order_changes_no_value() -> None:
    # the decoder declares its fields in the order of the page's first object (speed only)
    objs = [_base(), {**_base(), "id": "gen-2", "latency": None, "costDetails": {"input": 1}}]
    reordered = [dict(reversed(list(o.items()))) for o in objs]
    mixed = [objs[0], reordered[1]]  # objects need not share an order
    exact = mapping.observation_columns(objs)
    for page in (objs, reordered, mixed):
        body = _v2_page(page)
        assert mapping._key_order(body) == tuple(page[0])
        typed = mapping.typed_page_columns(body)
        assert typed is not None
        _same(typed, exact)
    # a first object not read whole from the page's start: the fields in the default order
    long = {**_base(), "statusMessage": "x" * 20000}
    body = _v2_page([long, objs[1]])
    assert mapping._key_order(body) == ()
    typed = mapping.typed_page_columns(body)
    assert typed is not None
    _same(typed, mapping.observation_columns([long, objs[1]]))
    assert mapping._key_order(b' {"meta": {}, "data": []}') == ()


@pytest.mark.parametrize("objs", [
    [_base(), _base()],  # the same keys in every object (dicts made in C)
    [_base(), {**_base(), "version": "v2", "promptName": None}],  # some null, some not
    [{"id": "a"}, {"id": "b"}],  # every field null
    [{**_base(), "metadata": {"n": BIG}}],  # json_text writes what orjson cannot
])
@pytest.mark.parametrize("extra", [None, {"resolved_by_id": True, "name": "over"}])
def test_the_metadata_column(objs: list[dict[str, Any]], extra: dict[str, Any] | None) -> None:
    def one(obj: dict[str, Any]) -> str | None:
        meta = {key: obj[field] for field, key in mapping._OBSERVATION_META
                if obj.get(field) is not None}
        return mapping.json_text({**meta, **(extra or {})})

    values = lambda key: [obj.get(key) for obj in objs]  # noqa: E731
    assert mapping._metadata(values, mapping._OBSERVATION_META, extra) == list(map(one, objs))
