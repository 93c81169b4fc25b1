"""What a metric's config points at, checked before anything runs, as alerts are: a judge the
run does not have (``judge: length_bnd``) or a record column that does not exist
(``column: latency``) would otherwise give a metric of dashes and an alert that never fires.

The references are read from the config fields every built-in metric uses for them (a
plugin's own field names are its own business): judges in ``judge``, ``judge_a``,
``judge_b``, ``support_judge``, ``flagged_by``, ``judges`` and any ``judge:NAME`` value;
record columns in ``column``, ``by``, ``slice_by`` and the column-or-judge fields
(``outcome``, ``prob``, ``correct``)."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator

from evalkit.config import PluginInstance, RunConfig
from evalkit.errors import ConfigError
from evalkit.results.schemas import RECORDS

__all__ = ["check_metric_references"]

_JUDGE_KEYS = ("judge", "judge_a", "judge_b", "support_judge", "flagged_by")
_COLUMN_KEYS = ("column", "by", "outcome", "prob", "correct")


def _judge_names(rc: RunConfig) -> tuple[set[str], bool]:
    """The judge names a metric may read, and whether the source may import scores of any
    other name (then an unknown name is not an error)."""
    names = {inst.name for inst in rc.judges}
    cfg = rc.source.config
    names |= set(getattr(cfg, "scores", None) or {})
    open_ended = bool(getattr(cfg, "scores_list", None)) or (
        bool(getattr(cfg, "import_scores", False)) and not getattr(cfg, "score_names", None))
    names |= set(getattr(cfg, "score_names", None) or [])
    return names, open_ended


def _references(inst: PluginInstance) -> Iterator[tuple[str, str, str]]:
    """``(key, kind, name)`` for each judge or column ``inst``'s config names."""
    cfg = inst.config
    if not dataclasses.is_dataclass(cfg):
        return
    values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    for key, value in values.items():
        if isinstance(value, str) and value.startswith("judge:"):
            yield key, "judge", value.split(":")[1]
        elif key in _JUDGE_KEYS and isinstance(value, str):
            yield key, "judge", value
        elif key == "judges" and isinstance(value, list):
            yield from ((f"judges[{i}]", "judge", v) for i, v in enumerate(value)
                        if isinstance(v, str))
        elif key in _COLUMN_KEYS and isinstance(value, str):
            yield key, "column", value
        elif key == "slice_by" and isinstance(value, list):
            yield from ((f"slice_by[{i}]", "column", v) for i, v in enumerate(value)
                        if isinstance(v, str))


def check_metric_references(rc: RunConfig) -> None:
    """Raise :class:`ConfigError` naming the first metric key that points at a judge the run
    does not have or a record column that does not exist, with the closest valid name."""
    judges, open_ended = _judge_names(rc)
    columns = [f.name for f in RECORDS if f.name != "run_id"]
    for inst in rc.metrics:
        for key, kind, name in _references(inst):
            if kind == "column":
                if name.startswith("metadata.") or name in columns:
                    continue
                valid: list[str] = columns
            else:
                if name in judges or open_ended:
                    continue
                valid = sorted(judges)
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            what = ("is not a judge of this run" if kind == "judge" else
                    "is not a record column (nor metadata.<path>)")
            fix = (f"add it to judges: or pick one of: {', '.join(valid) or 'none'}"
                   if kind == "judge" else f"columns: {', '.join(valid)}")
            raise ConfigError(f"metrics.{inst.name}.{key}: '{name}' {what}; {hint}{fix}")
