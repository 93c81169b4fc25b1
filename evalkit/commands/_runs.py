"""Finding a run directory from what a user typed on the command line."""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import EvalkitError


def find_run(ref: str, runs_dir: Path, command: str) -> Path:
    """The run directory named by ``ref``: a path holding ``manifest.json``, or a run id
    under ``runs_dir/<experiment>/``. Errors start with ``command`` (``push``, ``compare``)."""
    path = Path(ref)
    if (path / "manifest.json").is_file():
        return path
    hits = sorted(p.parent for p in runs_dir.glob(f"*/{ref}/manifest.json"))
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise EvalkitError(f"{command}: run id '{ref}' is in several experiments "
                           f"({', '.join(str(h) for h in hits)}); pass the run directory")
    raise EvalkitError(f"{command}: no run '{ref}' (neither a run directory with manifest.json "
                       f"nor a run id under {runs_dir}/<experiment>/); list runs with: "
                       "evalkit query \"SELECT run_id, experiment FROM runs\"")
