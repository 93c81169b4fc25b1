"""A run directory's lifecycle: who may write it and from where a run starts.

A run holds a lock on its directory (``.lock``, an advisory ``flock``) from before it
writes anything until it ends, so a second process with the same run id is refused at once.
An existing run is never written into again except by an explicit resume (``runner.resume``
or ``evalkit run ... --resume RUN``), which needs the run's config unchanged and keeps the
judgment parts of the batches it finished (:class:`evalkit.results.writer.Progress`);
everything else the stopped run wrote is removed and written again.

A run whose runs directory is a URL (object storage) is :class:`Staged`: it runs in a local
directory of its own, claimed as above, and is uploaded when it starts (its manifest), while
it runs (the manifest again, as a heartbeat: :mod:`evalkit.runner.heartbeat`) and when it
ends (everything, the manifest last). Each batch's judgment parts and then ``.progress``
are uploaded once the batch is judged; a resume downloads them into its stage, so it judges
only the batches missing, and replaces the rest of what the stopped run uploaded."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from evalkit.config import RunConfig
from evalkit.errors import ConfigError, EvalkitError, RunDirError
from evalkit.results.names import run_dir_of, run_key_of
from evalkit.results.runs import FINISHED, LOCK, read_manifest
from evalkit.results.writer import PROGRESS, Progress, writing

if TYPE_CHECKING:
    from evalkit.results.storage import RemoteRunsDir
    from evalkit.runner.heartbeat import Heartbeat

__all__ = ["Claim", "RunLocked", "Staged", "claim", "run_id_of", "stage_remote"]

DONE = (FINISHED, "dry_run")  # statuses of runs that ended as they were asked to
# runner keys that change where or how a run is reported, never what it holds: a resume may
# set them differently from the run it finishes
_FREE_RUNNER_KEYS = frozenset({"run_id", "resume", "runs_dir", "cache_dir", "fail_on",
                               "summary", "summary_slices", "max_judge_error_rate"})


class RunLocked(EvalkitError):
    """Another process is writing this run."""


def run_id_of(rc: RunConfig) -> str | None:
    """The run id the config asks for (``runner.resume`` or ``runner.run_id``), if any."""
    resume, run_id = rc.runner.resume, rc.runner.run_id
    if resume is not None and run_id is not None and run_id != resume:
        raise ConfigError(f"runner.run_id: '{run_id}' is not the run being resumed "
                          f"('{resume}'); leave runner.run_id unset when resuming")
    return resume or run_id


@dataclass
class Claim:
    """The run directory, locked for this process."""

    run_dir: Path
    progress: Progress | None  # what a resumed run keeps; None for a new run
    previous: dict[str, Any] | None  # the resumed run's manifest
    _lock: IO[str]

    def release(self, finished: bool) -> None:
        """Unlock; a finished run's directory keeps no lock file."""
        if finished:
            with contextlib.suppress(FileNotFoundError):
                (self.run_dir / LOCK).unlink()
        self._lock.close()  # closing the file releases the flock


def claim(run_dir: Path, run_id: str, rc: RunConfig) -> Claim:
    """Lock ``run_dir`` for this run and make it ready: a new run gets an empty directory, a
    resumed one keeps its finished batches. One-line errors for a run id in use, a run that
    exists (unless resumed), a resume of nothing, of a finished run or with another config."""
    resume = rc.runner.resume is not None
    if resume and read_manifest(run_dir) is None:
        raise ConfigError(f"runner.resume: no run '{run_id}' to resume in {run_dir.parent}/ "
                          "(no manifest.json there); list runs with: evalkit query "
                          "\"SELECT run_id, status FROM runs\"")
    with writing(run_dir):
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = _lock(run_dir, run_id)
    try:
        previous = read_manifest(run_dir)
        status = (previous or {}).get("status")
        if previous is not None and not resume:
            if status in DONE:
                raise ConfigError(f"runner.run_id: run '{run_id}' already exists (status "
                                  f"{status}) in {run_dir}; choose another run_id or leave it "
                                  "unset")
            raise ConfigError(f"runner.run_id: run '{run_id}' already exists (status "
                              f"{status}) in {run_dir}; finish it with --resume {run_id} "
                              "(runner.resume), or choose another run_id")
        if resume:
            if status in DONE:
                raise ConfigError(f"runner.resume: run '{run_id}' finished ({status}); nothing "
                                  "to resume")
            _check_same_config(previous or {}, rc, run_id)
        progress = Progress.read(run_dir) if resume else Progress()
        with writing(run_dir):
            _clear(run_dir, progress)
    except BaseException:
        lock.close()
        raise
    return Claim(run_dir, progress if resume else None, previous if resume else None, lock)


def _lock(run_dir: Path, run_id: str) -> IO[str]:
    import fcntl

    f = open(run_dir / LOCK, "a+")  # noqa: SIM115 (held open for the run)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "?"
        f.close()
        raise RunLocked(f"runner.run_id: run '{run_id}' is being written by another process "
                        f"(pid {holder}); wait for it to end, or choose another run_id") from None
    f.truncate(0)
    f.write(str(os.getpid()))
    f.flush()
    return f


def _check_same_config(previous: dict[str, Any], rc: RunConfig, run_id: str) -> None:
    def strip(config: Any) -> Any:
        if not isinstance(config, dict):
            return config
        runner = {k: v for k, v in (config.get("runner") or {}).items()
                  if k not in _FREE_RUNNER_KEYS}
        return {**config, "runner": runner}

    where = _first_difference(strip(previous.get("config")), strip(rc.composed), "")
    if where is not None:
        key, was, now = where
        raise ConfigError(f"runner.resume: the config differs from run '{run_id}''s at "
                          f"{key} (run: {was!r}, now: {now!r}); resume with the run's config "
                          "and overrides, or start a new run")


_MISSING = "<unset>"


def _first_difference(a: Any, b: Any, key: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            found = _first_difference(a.get(k, _MISSING), b.get(k, _MISSING),
                                      f"{key}.{k}" if key else str(k))
            if found is not None:
                return found
        return None
    return None if a == b else (key or "config", a, b)


def _clear(run_dir: Path, progress: Progress) -> None:
    """Remove what a stopped run left beyond ``progress``: temporary files, judgment parts
    of unfinished batches, and tables that are written again."""
    judgments = run_dir / "judgments"
    for path in [*run_dir.glob(".*.tmp-*"), *judgments.glob(".*.tmp-*")]:
        path.unlink()
    for path in judgments.glob("part-*.parquet"):
        number = path.stem.removeprefix("part-")
        if not number.isdigit() or int(number) >= progress.parts:
            path.unlink()
    for name in ("records", "metrics", "alerts", "rejects"):
        with contextlib.suppress(FileNotFoundError):
            (run_dir / f"{name}.parquet").unlink()
    progress.write(run_dir)  # its whole lines only: one cut short must not run into the next


@dataclass
class Staged:
    """A run whose runs directory is on object storage (:mod:`evalkit.results.storage`): it
    runs in the local ``stage`` directory, and :meth:`publish` uploads what it wrote to
    ``path`` in the store, the manifest last."""

    remote: RemoteRunsDir
    stage: Path  # a local directory of its own, removed when the run ends
    path: str  # the run's directory inside the store's filesystem
    stale: set[str] = field(default_factory=set)  # a resumed run's objects, replaced at the end
    beat_s: float = 30.0  # seconds between heartbeats
    heartbeat: Heartbeat | None = None
    sent: set[str] = field(default_factory=set)  # judgment files uploaded as the run went

    def upload_progress(self, run_dir: Path) -> None:
        """Upload the judgment files written since the last call, then ``.progress`` (which
        names them): a resume, from any machine, keeps the batches it lists."""
        new = [p for p in sorted((run_dir / "judgments").glob("*.parquet"))
               if p.name not in self.sent]
        self._upload_all(run_dir, new)
        self.sent.update(p.name for p in new)
        self._upload(run_dir, run_dir / PROGRESS)

    def _upload_all(self, run_dir: Path, files: list[Path]) -> None:
        self.remote.upload_all([(f, self._target(run_dir, f)) for f in files])

    @property
    def url(self) -> str:
        return self.remote.url_of(self.path)

    def start_heartbeat(self, manifest: dict[str, Any]) -> None:
        """Upload ``manifest`` (``running``) again every :attr:`beat_s` seconds until the
        run publishes its end (:meth:`publish`) or is closed."""
        from evalkit.runner.heartbeat import Heartbeat

        self.heartbeat = Heartbeat(self.remote, f"{self.path}/manifest.json", manifest,
                                   self.beat_s)

    def stop_heartbeat(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None

    def publish(self, run_dir: Path, manifest_only: bool = False,
                stopped: bool = False) -> None:
        """Upload ``run_dir``'s files (only its manifest when ``manifest_only``); a failed
        upload is one line naming ``runner.runs_dir``. A ``stopped`` run (failed or
        interrupted) whose data files fail to upload still uploads its manifest (readers
        never read a stopped run's tables), but not ``.progress``, which could name a part
        that is not up; the error is raised after."""
        from evalkit.results.storage import publish_order

        if manifest_only:
            self._upload(run_dir, run_dir / "manifest.json")
            return
        self.stop_heartbeat()  # no beat may land over the final manifest
        files = publish_order(run_dir.rglob("*"), run_dir)
        *data, manifest = files
        # the data files (those sent as the run went are in place) ...
        try:
            self._upload_all(run_dir, [f for f in data if f.parent.name != "judgments"
                                       or f.name not in self.sent])
        except RunDirError:
            if stopped:  # (what is in the bucket stays as it was, the manifest aside)
                self._upload(run_dir, manifest)
            raise
        if (run_dir / PROGRESS).exists():  # (stopped: what a resume keeps) once the parts
            self._upload(run_dir, run_dir / PROGRESS)  # it names are all up
            files.append(run_dir / PROGRESS)
        written = {self._target(run_dir, f) for f in files}
        # (parts of the stopped run not written again, a finished run's progress)
        for path in sorted((self.stale | {f"{self.path}/{PROGRESS}"}) - written):
            with contextlib.suppress(FileNotFoundError):
                self.remote.fs.delete_file(path)
        self.stale = set()
        self._upload(run_dir, manifest)  # ... and the manifest once they are all in place

    def _upload(self, run_dir: Path, local: Path) -> None:
        self.remote.upload(local, self._target(run_dir, local))

    def _target(self, run_dir: Path, local: Path) -> str:
        """The object a file of ``run_dir`` goes to."""
        return f"{self.path}/{local.relative_to(run_dir).as_posix()}"

    def close(self) -> None:
        import shutil

        self.stop_heartbeat()

        shutil.rmtree(self.stage, ignore_errors=True)


def stage_remote(rc: RunConfig, run_id: str) -> Staged:
    """Open and check ``runner.runs_dir`` (a URL); refuse ``runner.report``, a run id already
    there (unless resumed), or a resume of nothing, of a finished run or of one whose writer
    may still be running (its heartbeat is fresh, or its pid alive here); make a local
    staging directory (holding the manifest of the run being resumed, so that :func:`claim`
    resumes it)."""
    import json
    import tempfile

    from evalkit.results.storage import open_runs_dir, run_stopped
    from evalkit.runner.heartbeat import heartbeat_interval

    beat_s = heartbeat_interval()
    remote = open_runs_dir(rc.runner.runs_dir, "runner.runs_dir")
    if rc.runner.report:
        raise ConfigError(f"runner.report: no report is written for a run on object storage "
                          f"({remote.shown}); set runner.report=false")
    if getattr(rc.source.config, "incremental", False):  # (Langfuse's: see its docs)
        raise ConfigError(f"source.incremental: the last run's window is looked up in a local "
                          f"runs directory, and runner.runs_dir is on object storage "
                          f"({remote.shown}); set source.incremental=false and give the window, "
                          "or use a local runs_dir")
    path = remote.path(*run_key_of(rc.experiment, run_id))
    previous = remote.read_json(f"{path}/manifest.json")
    status = (previous or {}).get("status")
    if rc.runner.resume is None:
        if previous is not None:
            raise ConfigError(f"runner.run_id: run '{run_id}' already exists (status {status}) "
                              f"in {remote.url_of(path)}; choose another run_id or leave it "
                              "unset")
        if remote.exists(path):
            raise ConfigError(f"runner.run_id: {remote.url_of(path)} already holds objects; "
                              "choose another run_id or leave it unset")
    elif previous is None:
        raise ConfigError(f"runner.resume: no run '{run_id}' to resume in "
                          f"{remote.url_of(remote.path(rc.experiment))}/ (no manifest.json "
                          "there); list runs with: evalkit query --runs-dir URL \"SELECT "
                          "run_id, status FROM runs\"")
    elif status in DONE:
        raise ConfigError(f"runner.resume: run '{run_id}' finished ({status}); nothing to "
                          "resume")
    elif status == "running" and not run_stopped(previous):
        writer = previous.get("writer") if isinstance(previous.get("writer"), dict) else {}
        raise ConfigError(f"runner.resume: run '{run_id}' may still be running (its writer: "
                          f"pid {writer.get('pid', '?')} on {writer.get('host', '?')}, last "
                          f"heartbeat {previous.get('heartbeat_at', 'none')}); resume it once "
                          "that process has ended (or its heartbeat is a few intervals old), "
                          "or choose another run_id")
    # private to this user (0700); the caller removes it when the run ends
    staged = Staged(remote, Path(tempfile.mkdtemp(prefix=f"evalkit-stage-{run_id}-")), path,
                    beat_s=beat_s)
    if previous is not None:
        staged.stale = remote.files_under(path)
        run_dir = run_dir_of(staged.stage, rc.experiment, run_id)
        run_dir.mkdir(parents=True)
        (run_dir / "manifest.json").write_text(json.dumps(previous))
        _download_kept(staged, run_dir)
    return staged


def _download_kept(staged: Staged, run_dir: Path) -> None:
    """Bring the stopped run's ``.progress`` and judgment files into the stage, so the run
    is resumed as a local one (:func:`claim` keeps the parts ``.progress`` names and
    removes the rest)."""
    progress = f"{staged.path}/{PROGRESS}"
    if progress not in staged.stale:  # (uploaded after a batch: none finished)
        return
    (run_dir / "judgments").mkdir()
    wanted = [p for p in staged.stale if p.rsplit("/", 2)[-2:-1] == ["judgments"]
              and p.endswith(".parquet") and not p.rsplit("/", 1)[-1].startswith(".")]
    staged.remote.download_all([(path, run_dir / path[len(staged.path) + 1:])
                                for path in [progress, *sorted(wanted)]])
