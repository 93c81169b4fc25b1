"""Commands on a runs directory in object storage (``--runs-dir s3://...``): the runs a
command names are copied to a private local directory, the command works on them there as
on any local run, and what it writes beside a run (a report) or as a new run (a merge) is
uploaded back: files first, a new run's manifest last, so that a reader never sees a run
before it is whole. Only the runs named are copied (and the labels, which stay with the runs
directory); nothing else of the bucket is read.

:func:`runs_at` is the one entry point: for a local ``--runs-dir`` it hands the directory
itself to the same code."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.commands._runs import find_run, sweep_runs
from evalkit.errors import EvalkitError
from evalkit.results.storage import RemoteRun, RemoteRunsDir, is_remote, open_runs_dir

__all__ = ["Runs", "runs_at"]


@dataclass
class Runs:
    """The runs a command works on: ``path`` is a local runs directory (the given one, or
    the private copy of a remote one); ``remote`` the store it came from, if any."""

    path: Path
    command: str
    remote: RemoteRunsDir | None = None
    _listed: list[RemoteRun] | None = field(default=None, repr=False)
    _origin: dict[Path, RemoteRun] = field(default_factory=dict, repr=False)

    def find(self, ref: str, unfinished: bool = False) -> Path:
        """The local directory of the run ``ref`` names (copied first when remote)."""
        if self.remote is None:
            return find_run(ref, self.path, self.command, unfinished)
        return self._fetch(self.remote.find(self._runs(), ref, self.command, unfinished))

    def sweep(self, sweep_id: str) -> list[Path]:
        """The local directories of sweep ``sweep_id``'s runs (copied first when remote)."""
        if self.remote is None:
            return sweep_runs(sweep_id, self.path)
        jobs = sorted((r for r in self._runs() if r.manifest.get("sweep_id") == sweep_id),
                      key=lambda r: (r.manifest.get("sweep_job") or 0, r.run_id))
        return [self._fetch(r) for r in jobs]

    def labels(self) -> None:
        """Copy the runs directory's labels (``_labels/``) too, when remote."""
        if self.remote is not None:
            from evalkit.labels.store import LABELS_DIR

            prefix = self.remote.path(LABELS_DIR)
            self._download([(p, p[len(prefix) + 1:])
                            for p in sorted(self.remote.files_under(prefix))],
                           self.path / LABELS_DIR)

    def shown(self, run_dir: Path) -> str:
        """Where the run ``run_dir`` (from :meth:`find`) is, as it may be printed: its URL
        when it was copied from the store (not the private copy's path)."""
        origin = self._origin.get(run_dir)
        return str(run_dir) if self.remote is None or origin is None else \
            self.remote.url_of(origin.path)

    def publish_beside(self, run_dir: Path, files: list[Path]) -> list[str]:
        """Upload ``files`` (written in the local ``run_dir``) into that run's directory in
        the store; their URLs (nothing to do for a local runs directory)."""
        origin = self._origin.get(run_dir)
        if self.remote is None or origin is None:
            return [str(f) for f in files]
        return [self._upload(f, f"{origin.path}/{f.relative_to(run_dir).as_posix()}")
                for f in files]

    def publish_run(self, run_dir: Path) -> str:
        """Upload the new run ``run_dir`` (under ``path``) whole, its manifest last; its
        URL (its path for a local runs directory)."""
        if self.remote is None:
            return str(run_dir)
        from evalkit.results.storage import publish_order

        rel = run_dir.relative_to(self.path).as_posix()
        target = self.remote.path(*rel.split("/"))
        if self.remote.exists(target):
            raise EvalkitError(f"{self.command}: {self.remote.url_of(target)} already holds "
                               "objects; nothing was uploaded")
        for f in publish_order(run_dir.rglob("*"), run_dir):
            self._upload(f, f"{target}/{f.relative_to(run_dir).as_posix()}")
        return self.remote.url_of(target)

    # --- the copy ---------------------------------------------------------------------------

    def _runs(self) -> list[RemoteRun]:
        if self._listed is None:
            assert self.remote is not None
            self._listed = self.remote.list_runs()
        return self._listed

    def _fetch(self, run: RemoteRun) -> Path:
        local = self.path / run.experiment / run.run_id
        if local not in self._origin:
            self._download([(p, run.name_of(p)) for p in run.files], local)
            self._origin[local] = run
        return local

    def _download(self, objects: list[tuple[str, str]], local: Path) -> None:
        """Copy each ``(object, its name under local)`` of ``objects`` to ``local``; a hidden
        or odd object name is never a path out of the copy and is left out."""
        assert self.remote is not None
        items = [(path, local / rel) for path, rel in objects if rel and not any(
            p in ("", ".", "..") or p.startswith(".") for p in rel.split("/"))]
        local.mkdir(parents=True, exist_ok=True)
        for parent in {target.parent for _, target in items}:
            parent.mkdir(parents=True, exist_ok=True)
        self.remote.download_all(items)

    def _upload(self, local: Path, target: str) -> str:
        assert self.remote is not None
        self.remote.upload(local, target)
        return self.remote.url_of(target)


@contextlib.contextmanager
def runs_at(runs_dir: str, command: str) -> Iterator[Runs]:
    """The runs of ``--runs-dir`` for ``command``: the local directory itself, or, for a
    URL, a private copy (removed afterwards) filled with the runs the command asks for."""
    if not is_remote(runs_dir):
        yield Runs(Path(runs_dir), command)
        return
    remote = open_runs_dir(runs_dir, f"{command} --runs-dir")
    scratch = Path(tempfile.mkdtemp(prefix=f"evalkit-{command}-"))  # (0700: this user's)
    try:
        yield Runs(scratch, command, remote)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


