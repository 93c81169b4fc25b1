"""Pausing the cyclic garbage collector around work that allocates many long- or short-lived
containers holding no cycles (parsed rows, a parsed page, a large import): the collections
those allocations trigger traverse every live container and free nothing. The switch is
process-wide, so it wraps synchronous work only."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block, back as it was after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
