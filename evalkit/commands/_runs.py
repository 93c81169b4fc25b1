"""Finding a run directory from what a user typed on the command line."""

from __future__ import annotations

import os
from pathlib import Path

from evalkit.errors import EvalkitError
from evalkit.results.names import check_name
from evalkit.results.runfiles import RunFileError, load_manifest
from evalkit.results.runs import FINISHED, read_manifest, run_manifests, writer_gone
from evalkit.results.storage import is_remote, shown_url


def local_runs_dir(runs_dir: str, command: str) -> Path:
    """``--runs-dir`` as a local directory; a URL (object storage) is a one-line error, for
    the commands that work on local runs only."""
    if is_remote(runs_dir):
        raise EvalkitError(f"{command} --runs-dir: {shown_url(runs_dir)} is on object storage; "
                           f"{command} needs a local runs directory: copy the runs it should "
                           "use to disk (aws s3 sync, or your store's tool) and pass that")
    return Path(runs_dir)


def find_run(ref: str, runs_dir: Path, command: str, unfinished: bool = False) -> Path:
    """The run directory named by ``ref``: a path holding ``manifest.json``, a run id under
    ``runs_dir/<experiment>/``, or ``latest`` (the run that finished last); a finished
    (``ok``) run unless ``unfinished``. Errors start with ``command`` (``push``,
    ``compare``)."""
    path = Path(ref)
    manifest = path / "manifest.json"
    if manifest.exists() or manifest.is_symlink():  # (a FIFO or a device too: refused below)
        return _finished(path, command, unfinished)
    if ref == "latest":
        return latest_run(runs_dir, command)
    missing = (f"{command}: no run '{ref}' (neither a run directory with manifest.json "
               f"nor a run id under {runs_dir}/<experiment>/); list runs with: "
               "evalkit query \"SELECT run_id, experiment FROM runs\"")
    if "/" in ref or os.sep in ref or ref in (".", ".."):  # a path, and no run there
        raise EvalkitError(missing)
    # a run id: a name, never a path or a glob pattern
    check_name(ref, command, example="a run id from: evalkit query \"SELECT run_id FROM "
               "runs\", or a run directory")
    hits = sorted(p.parent for p in runs_dir.glob(f"*/{ref}/manifest.json")
                  if not p.parent.parent.name.startswith("."))
    if len(hits) == 1:
        return _finished(hits[0], command, unfinished)
    if len(hits) > 1:
        raise EvalkitError(f"{command}: run id '{ref}' is in several experiments "
                           f"({', '.join(str(h) for h in hits)}); pass the run directory")
    raise EvalkitError(missing)


def latest_run(runs_dir: Path, command: str) -> Path:
    """The run directory under ``runs_dir`` whose run finished last with status ``ok``."""
    best: tuple[str, str, Path] | None = None
    for manifest in run_manifests(runs_dir):
        m = read_manifest(manifest.parent)  # (an odd one: a warning line, left out)
        if m is None:
            continue
        if m.get("status") == "ok" and m.get("finished_at"):
            key = (str(m["finished_at"]), str(m.get("run_id")), manifest.parent)
            best = key if best is None or key[:2] > best[:2] else best
    if best is None:
        raise EvalkitError(f"{command}: no finished run under {runs_dir.resolve()}/; run an "
                           "experiment first (evalkit run +experiment=quickstart) or pass "
                           "--runs-dir")
    return best[2]


def _finished(run_dir: Path, command: str, unfinished: bool) -> Path:
    try:
        status = load_manifest(run_dir).get("status")
    except RunFileError as exc:  # the run asked for: its odd manifest is the error
        raise EvalkitError(f"{command}: {exc}") from None
    if status == "running" and writer_gone(run_dir):
        status = "interrupted"  # killed: its manifest could not say so
    if unfinished or status == FINISHED:
        return run_dir
    anyway = {"query": " (or pass --all-runs to use it as it is)",
              "push": " (or pass --all-runs to use it as it is)",
              "connect": " (or pass include_unfinished=True to use it as it is)"}
    raise EvalkitError(f"{command}: run {run_dir} is '{status}', not finished: its tables may "
                       f"be partial; finish it with: evalkit run ... --resume {run_dir.name}"
                       + anyway.get(command, ""))


def sweep_runs(sweep_id: str, runs_dir: Path) -> list[Path]:
    """The run directories of the jobs of sweep ``sweep_id`` (the id ``evalkit run -m``
    prints), in job order; empty when no run under ``runs_dir`` belongs to it."""
    found = []
    for manifest in run_manifests(runs_dir):
        m = read_manifest(manifest.parent)
        if m is not None and m.get("sweep_id") == sweep_id:
            job = m.get("sweep_job")
            found.append((job if isinstance(job, int) else 1 << 30, manifest.parent.name,
                          manifest.parent))
    return [d for _, _, d in sorted(found)]


def sweep_ids(runs_dir: Path) -> list[str]:
    """Every sweep id under ``runs_dir`` (for completion)."""
    ids = set()
    for manifest in run_manifests(runs_dir):
        try:
            m = load_manifest(manifest.parent)
        except (OSError, RunFileError):  # (completion prints nothing but its words)
            continue
        if isinstance(m.get("sweep_id"), str):
            ids.add(m["sweep_id"])
    return sorted(ids)
