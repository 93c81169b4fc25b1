"""One rich progress bar per process for every LLM judge running in it: done/total, rate,
errors, spend (``unknown`` for calls without a known price) and time left per judge. Shown
on a terminal only (a log file gets the summary instead)."""

from __future__ import annotations

import sys
import time
from typing import Any


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


class _Board:
    def __init__(self) -> None:
        self.progress: Any = None
        self.users = 0

    def open(self) -> Any:
        if self.progress is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}/s"), TextColumn("errors {task.fields[errors]}"),
                TextColumn("{task.fields[spend]}"), TimeElapsedColumn(),
                TextColumn("eta"), TimeRemainingColumn(),
                console=_console(), transient=False)
            self.progress.start()
        self.users += 1
        return self.progress

    def close(self) -> None:
        self.users -= 1
        if self.users == 0 and self.progress is not None:
            self.progress.stop()
            self.progress = None


_BOARD = _Board()


def spend_text(cost: float | None, unpriced: int) -> str:
    """What calls cost: ``$0.0123``; ``unknown`` when no call had a known price (a
    self-hosted or new model; ``cost`` None or 0), never ``$0.0000``; ``$0.0123 +
    unknown`` for a mix."""
    if cost is None or (unpriced and not cost):
        return "unknown"
    return f"${cost:.4f}" + (" + unknown" if unpriced else "")


class JudgeProgress:
    """The progress line of one judge over one batch; a no-op when disabled or not on a
    terminal."""

    def __init__(self, name: str, total: int, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.name = name
        self.total = total
        self.errors = 0
        self.spend = 0.0
        self.unpriced = 0
        self.done = 0
        self.started = time.monotonic()
        self.task: Any = None
        self.progress: Any = None

    def __enter__(self) -> JudgeProgress:
        if self.enabled:
            self.progress = _BOARD.open()
            from evalkit.safetext import markup  # (the description is read as markup)

            self.task = self.progress.add_task(markup(self.name), total=self.total, errors=0,
                                               spend=spend_text(0.0, 0), rate="0")
        return self

    def advance(self, error: bool, cost: float | None) -> None:
        """One record judged."""
        self.done += 1
        self.errors += error
        self.spend += cost or 0.0
        self.unpriced += cost is None and not error
        if self.progress is not None:
            elapsed = time.monotonic() - self.started
            rate = f"{self.done / elapsed:.1f}" if elapsed > 0 else "0"
            self.progress.update(self.task, advance=1, errors=self.errors,
                                 spend=spend_text(self.spend, self.unpriced), rate=rate)

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            _BOARD.close()
