"""Naming runs by what tells them apart: the command-line overrides one run has and the
others do not share (a sweep's values, ``threshold=0.8``). Shared by the report's tabs and
charts and a sweep's closing table, so a run has one name wherever it is shown."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["names_by_overrides"]

# overrides that never tell runs apart for a reader (the experiment is in the title, the
# runner's settings do not change a result)
_SET_ASIDE = ("experiment=", "runner.", "hydra.", "hydra/")


def _overrides(given: Sequence[str]) -> dict[str, str]:
    out = {}
    for o in given:
        key, eq, value = str(o).lstrip("+~").partition("=")
        if eq and not f"{key}=".startswith(_SET_ASIDE):
            out[key] = value
    return out


def names_by_overrides(overrides: Sequence[Sequence[str]], ids: Sequence[str]) -> list[str]:
    """One name per run: its overrides that differ between the runs, each key cut to its
    last part unless two differing keys end alike (``judges.a.threshold=1``); the run's id
    (from ``ids``) when no override tells it apart, or beside its overrides when another
    run has the same ones."""
    each = [_overrides(o) for o in overrides]
    keys = list(dict.fromkeys(k for o in each for k in o))
    differ = [k for k in keys if len({o.get(k) for o in each}) > 1] if len(each) > 1 else keys
    tails = [k.rsplit(".", 1)[-1] for k in differ]
    short = {k: (t if tails.count(t) == 1 else k) for k, t in zip(differ, tails, strict=True)}
    names = [", ".join(f"{short[k]}={o[k]}" if k in o else f"{short[k]} unset"
                       for k in differ) or run_id for o, run_id in zip(each, ids, strict=True)]
    if len(set(names)) < len(names):  # the same overrides (a run repeated): ids tell apart
        names = [n if n == run_id else f"{n} · {run_id}" for n, run_id in
                 zip(names, ids, strict=True)]
    return names
