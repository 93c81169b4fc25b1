"""One page for all the runs of a sweep (``evalkit run -m ... runner.report=true``). Each job
writes its own run's report and notes its run directory in a list the sweep started; when
the sweep ends, Hydra calls :class:`SweepReport` in the launching process, which writes one
page for every run the jobs noted (``runs/<experiment>/sweep-<first run id>/``), whichever
launcher ran them (in this process or in others)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

ENV = "EVALKIT_SWEEP_RUNS"  # the file the jobs of the running sweep note their runs in

# the ranking the sweep's page showed, and the run directories it ranked: the closing table
# (evalkit.runner.sweep.finish, later in the same process) shows it rather than rank again
_shown: tuple[frozenset[str], Any] | None = None


def shown_ranking(run_dirs: list[Path]) -> Any:
    """The ranking this sweep's page showed when it ranked exactly ``run_dirs``, else None
    (taken once: a later sweep in the process ranks its own runs)."""
    global _shown
    shown, _shown = _shown, None
    if shown is None or shown[0] != frozenset(str(Path(d).resolve()) for d in run_dirs):
        return None
    return shown[1]


def note_sweep_run(run_dir: Path) -> None:
    """In a job of a sweep with ``runner.report=true``: add ``run_dir`` to the sweep's list
    (one short line appended, atomic on a local file system). Outside a sweep: nothing."""
    listed = os.environ.get(ENV)
    if not listed:
        return
    from hydra.core.hydra_config import HydraConfig

    fd = os.open(listed, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{HydraConfig.get().job.num}\t{run_dir.resolve()}\n".encode())
    finally:
        os.close(fd)


class SweepReport(Callback):
    """Hydra callback: the sweep's page, once every job has ended. The list's path goes to
    the jobs through the environment, which launchers' worker processes inherit."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        global _shown
        _shown = None
        fd, path = tempfile.mkstemp(prefix="evalkit-sweep-", suffix=".txt")
        os.close(fd)
        os.environ[ENV] = path

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        path = os.environ.pop(ENV, None)
        if not path or not os.path.exists(path):
            return
        listed = Path(path)
        text = listed.read_text()
        listed.unlink()
        jobs = sorted((int(num), Path(run)) for num, run in (
            line.split("\t", 1) for line in text.splitlines() if "\t" in line))
        dirs = [run for _, run in jobs if (run / "manifest.json").exists()]
        if len(dirs) < 2:
            return
        from evalkit.errors import EvalkitError
        from evalkit.report import write_report

        out = dirs[0].parent / f"sweep-{dirs[0].name}"
        runner = config.get("runner") or {}
        try:
            files = write_report(dirs, out, n_boot=int(runner.get("report_n_boot", 200)))
        except EvalkitError as exc:
            print(f"evalkit: error: sweep report: {exc}")
            return
        if files.ranking is not None:
            global _shown
            _shown = (frozenset(str(d.resolve()) for d in dirs), files.ranking)
        print(f"sweep report ({len(dirs)} runs): {files.html}")
