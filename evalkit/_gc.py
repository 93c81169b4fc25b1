"""Pausing the cyclic garbage collector around work that allocates many long- or short-lived
containers holding no cycles (parsed rows, a parsed page, a large import): the collections
those allocations trigger traverse every live container and free nothing. ``gc_paused`` is
a process-wide switch, so it wraps synchronous work only; ``full_collections_paused`` keeps
the young collections and may wrap asynchronous work."""

from __future__ import annotations

import contextlib
import gc
import threading
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


# no automatic full collection while any block below runs (explicit gc.collect() still does)
_NO_FULL = 1 << 30
_full_paused = 0
_full_lock = threading.Lock()
_full_threshold = 0


@contextlib.contextmanager
def full_collections_paused() -> Iterator[None]:
    """No automatic full (oldest-generation) collection inside the block; the young ones go
    on and free the short-lived cycles of the work inside. For work that keeps many
    containers alive for its whole length (thousands of judge calls in flight, each a chain
    of suspended coroutines): every full collection would traverse them all and free
    nothing. Unlike :func:`gc_paused` it may wrap asynchronous work: blocks may overlap (in
    tasks or threads), and the threshold is back once the last one ends."""
    global _full_paused, _full_threshold
    with _full_lock:
        if _full_paused == 0:
            young, middle, _full_threshold = gc.get_threshold()
            gc.set_threshold(young, middle, _NO_FULL)
        _full_paused += 1
    try:
        yield
    finally:
        with _full_lock:
            _full_paused -= 1
            if _full_paused == 0:
                young, middle, _ = gc.get_threshold()
                gc.set_threshold(young, middle, _full_threshold)
