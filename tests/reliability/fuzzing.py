"""Hypothesis settings for the fuzz tests: bounded for CI (examples and deadline set here),
scaled up by ``EVALKIT_FUZZ_SCALE`` for the soak in ``bench/reliability.py``, which also
reads the counts each test keeps (``EVALKIT_FUZZ_REPORT``: a JSON file written when the
test process ends)."""

from __future__ import annotations

import atexit
import json
import os
from collections import Counter, defaultdict
from datetime import timedelta

from hypothesis import HealthCheck, settings

SCALE = float(os.environ.get("EVALKIT_FUZZ_SCALE", "1"))

# what each fuzz test saw: examples run, records read, rejects, ... (for the figures)
COUNTS: defaultdict[str, Counter[str]] = defaultdict(Counter)


def fuzz(examples: int):
    """The settings of one fuzz test: ``examples`` in CI (times ``EVALKIT_FUZZ_SCALE``), a
    generous deadline (the machine may be shared), derandomized in CI (the same examples on
    every run: a failure is never a fluke of the draw), no example database in the tree."""
    return settings(max_examples=max(1, int(examples * SCALE)), deadline=timedelta(seconds=10),
                    database=None, derandomize=SCALE == 1,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])


def _report() -> None:
    path = os.environ.get("EVALKIT_FUZZ_REPORT")
    if path and COUNTS:
        with open(path, "w") as fh:
            json.dump({k: dict(v) for k, v in COUNTS.items()}, fh, indent=1)


atexit.register(_report)
