"""Runs directories on object storage: ``runner.runs_dir`` or ``--runs-dir`` given as a URL
that pyarrow's filesystem layer opens (``s3://bucket/prefix``, with pyarrow's options in the
query string: ``?region=...``, ``?endpoint_override=HOST:PORT&scheme=http`` for an
S3-compatible server; ``gs://``, ``hdfs://``, ``abfs://`` where pyarrow supports them).

Object stores have no rename and no lock, so a run is written elsewhere and published:
it runs in a local staging directory exactly as a local run does, its ``manifest.json``
(``status: running``) is uploaded when it starts, and when it ends every file it wrote is
uploaded, the manifest with its final status last. An object appears only when its upload
completes, and readers read a run's tables only when its manifest says ``ok``, so a run
that was killed or failed is never read as data. Readers list the prefix once, read the
manifests, and hand DuckDB pyarrow datasets over the Parquet objects (see
:mod:`evalkit.results.query`).

Credentials belong in the environment (``AWS_ACCESS_KEY_ID`` ...) or pyarrow's usual
places; those written into the URL (``s3://KEY:SECRET@bucket/...``) work, and are masked
wherever the URL is shown: :func:`shown_url` is the only form that is printed or stored.
Nothing here imports pyarrow until a remote runs directory is opened."""

from __future__ import annotations

import fnmatch
import math
import os
import re
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit

from evalkit.errors import ConfigError
from evalkit.redact import mask, register_url
from evalkit.results.runs import pid_gone

if TYPE_CHECKING:
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

__all__ = ["STALE_BEATS", "SWAP_DIR", "SWAP_MARKER", "RemoteRun", "RemoteRunsDir",
           "error_reason", "heartbeat_stale", "is_remote", "is_staging", "open_runs_dir",
           "publish_order", "run_stopped", "shown_url", "staging_name", "writer_gone",
           "writer_tag"]

# a URL: scheme://..., or scheme:/... (a slash short: a typo that must not become a local
# directory named "s3:"); a one-letter scheme is a Windows drive
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):/")
_DENIED = ("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
           "Forbidden", "403", "InvalidToken", "ExpiredToken", "UNRECOGNIZED_CLIENT")
_UNREACHABLE = ("NETWORK_CONNECTION", "curlCode", "Could not connect", "Could not resolve",
                "Connection refused", "timed out", "Timeout")
_MANIFEST_READERS = 16  # manifests (or Parquet footers) read at once: small GETs each
_TRANSFERS = 8  # objects a command or a run downloads or uploads at once
_CHUNK = 8 << 20  # bytes an upload or download copies at a time
_STAGING = ".tmp-"  # in a staging object's name (:func:`staging_name`)
_COPY_MAX = 5 << 30  # bytes S3 copies in one request (a staged object is moved by a copy)
# ``evalkit compact`` of a remote run (:mod:`evalkit.commands._compact_remote`) uploads the
# merged judgments into SWAP_DIR, then writes SWAP_MARKER: from then on readers read the run's
# judgments from SWAP_DIR while ``judgments/`` is rewritten, until the marker is removed
SWAP_DIR = ".judgments-new"
SWAP_MARKER = ".judgments-swap"
# a running run whose heartbeat is older than this many of its writer's intervals has
# stopped: one late beat (a slow upload, a busy host) must not make a live run look dead
STALE_BEATS = 3


def is_remote(runs_dir: object) -> bool:
    """Whether ``runs_dir`` is a URL (``scheme://...``, or ``scheme:/...``, which is one
    mistyped) rather than a local path."""
    return isinstance(runs_dir, str) and bool(_SCHEME.match(runs_dir))


def shown_url(url: str) -> str:
    """``url`` as it may be printed or stored: scheme, bucket and path only (no user-info,
    no query string, which may hold credentials)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return mask(url.split("?", 1)[0])
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


def error_reason(exc: BaseException) -> str:
    """An I/O error's first line, masked and cut short: what a one-line error quotes."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return mask(text)[:240]


def _at_once(copy: Any, items: list[tuple[Any, Any]]) -> None:
    """``copy(*item)`` for each of ``items``, :data:`_TRANSFERS` at a time (a transfer is a
    round trip or more: the wait, not the bytes, is its cost); the first failure is raised."""
    from concurrent.futures import ThreadPoolExecutor

    if items:
        with ThreadPoolExecutor(min(_TRANSFERS, len(items))) as pool:
            list(pool.map(lambda item: copy(*item), items))


def open_runs_dir(url: str, key: str) -> RemoteRunsDir:
    """The runs directory at ``url``, checked: the URL parses, its filesystem is one pyarrow
    knows, its bucket exists and answers with the credentials given. Anything else is one
    :class:`~evalkit.errors.ConfigError` line naming ``key`` and the fix."""
    register_url(url)  # the URL's credentials are masked in every message from here on
    shown = shown_url(url)
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        fs, root = pafs.FileSystem.from_uri(url)
    except (pa.ArrowInvalid, ValueError, TypeError) as exc:
        raise ConfigError(f"{key}: cannot open '{mask(url)}' ({error_reason(exc)}); give a local "
                          "directory or a URL such as s3://BUCKET/PREFIX (S3 options: "
                          "?region=REGION, ?endpoint_override=HOST:PORT&scheme=http)") from None
    except (OSError, pa.ArrowException) as exc:  # (from_uri may ask the store: S3 a
        # bucket's region when none is given, Azure for a token)
        raise _access_error(key, shown, url, exc, None) from None
    root = root.rstrip("/")
    scheme = urlsplit(url).scheme
    runs = RemoteRunsDir(fs=fs, root=root, scheme=scheme, key=key, shown=shown)
    runs.check(url)
    return runs


def _access_error(key: str, shown: str, url: str, exc: BaseException,
                  endpoint: str | None) -> ConfigError:
    reason = error_reason(exc)
    if any(word in str(exc) for word in _DENIED):
        return ConfigError(f"{key}: the storage refused the credentials for {shown} "
                           f"({reason}); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                           "AWS_PROFILE) to credentials that may list, read and write it")
    if any(word in str(exc) for word in _UNREACHABLE):
        where = f"the endpoint {endpoint}" if endpoint else "the storage"
        return ConfigError(f"{key}: cannot reach {where} for {shown} ({reason}); check the "
                           "network, and endpoint_override=HOST:PORT and scheme=http|https "
                           "in the URL")
    return ConfigError(f"{key}: cannot use {shown} ({reason}); check the URL and the "
                       "credentials")


@dataclass
class RemoteRun:
    """One run under a remote runs directory: its manifest, its status as readers see it,
    and its files (paths inside the filesystem, sorted)."""

    path: str
    experiment: str
    run_id: str
    manifest: dict[str, Any]
    status: str | None
    files: list[str] = field(default_factory=list)
    # objects read in place of others: a compaction's merged judgments (see
    # :data:`SWAP_MARKER`), by the path they stand for
    stand_in: dict[str, str] = field(default_factory=dict)

    def name_of(self, path: str) -> str:
        """The name of the run's object ``path`` relative to the run (for a stand-in, the
        name of the object it stands for)."""
        return self.stand_in.get(path, path)[len(self.path) + 1:]

    def table_files(self, pattern: str) -> list[str]:
        """The run's files matching ``pattern`` (relative to the run, as in
        :data:`evalkit.results.runs.TABLE_FILES`)."""
        return [f for f in self.files if fnmatch.fnmatchcase(self.name_of(f), pattern)]


@dataclass
class RemoteRunsDir:
    """A runs directory on a pyarrow filesystem: ``root`` is its path inside ``fs``."""

    fs: pafs.FileSystem
    root: str
    scheme: str
    key: str  # the setting it came from, for messages
    shown: str  # its URL without credentials

    def url_of(self, path: str) -> str:
        """The printable URL of ``path`` (a path inside the filesystem)."""
        return f"{self.scheme}://{path}"

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts]) if self.root else "/".join(parts)

    def check(self, url: str) -> None:
        """One request that proves the bucket (or root) is there and answers; it fails fast
        (one attempt) so an unreachable endpoint is an error at once, not after retries."""
        import pyarrow as pa
        import pyarrow.fs as pafs

        fs, endpoint = self.fs, None
        if isinstance(fs, pafs.S3FileSystem):
            options = fs.__reduce__()[1][0]
            endpoint = options.get("endpoint_override") or None
            fs = pafs.S3FileSystem(**options, retry_strategy=pafs.AwsStandardS3RetryStrategy(
                max_attempts=1))
            bucket = self.root.split("/", 1)[0]
            if not bucket:
                raise ConfigError(f"{self.key}: no bucket in '{mask(url)}'; give "
                                  "s3://BUCKET/PREFIX")
            target = bucket
        else:
            target = self.root
        try:
            info = fs.get_file_info(target)
        except (OSError, pa.ArrowException) as exc:
            raise _access_error(self.key, self.shown, url, exc, endpoint) from None
        if isinstance(self.fs, pafs.S3FileSystem) and info.type == pafs.FileType.NotFound:
            raise ConfigError(f"{self.key}: there is no bucket '{target}' at {self.shown}; "
                              "create it (aws s3 mb s3://" + target + ") or fix the URL")

    def list_runs(self, objects: list[pafs.FileInfo] | None = None) -> list[RemoteRun]:
        """Each run (``<experiment>/<run_id>/manifest.json``) under the root with a readable
        manifest, in path order, with its status: a ``running`` run whose writer has
        stopped (:func:`run_stopped`) is ``interrupted``. ``objects``: the root's
        :meth:`objects`, when the caller listed them already."""
        infos = self.objects(self.root) if objects is None else objects
        by_run: dict[str, list[str]] = {}
        marked: set[str] = set()  # runs whose compaction committed (:data:`SWAP_MARKER`)
        merged: dict[str, list[str]] = {}  # and their merged judgments
        manifests = []
        prefix = len(self.root) + 1 if self.root else 0
        for info in infos:
            parts = info.path[prefix:].split("/")
            if len(parts) < 3:
                continue
            run_path = self.path(parts[0], parts[1])
            if parts[2] == SWAP_MARKER and len(parts) == 3:
                marked.add(run_path)
            elif parts[2] == SWAP_DIR and len(parts) == 4 and not parts[3].startswith("."):
                merged.setdefault(run_path, []).append(info.path)
            if any(p.startswith(".") for p in parts):
                continue
            by_run.setdefault(run_path, []).append(info.path)
            if len(parts) == 3 and parts[2] == "manifest.json":
                manifests.append(run_path)
        manifests.sort(key=lambda p: p.split("/"))  # (the order of a local listing)
        runs = []
        for run_path, manifest in zip(manifests, self._read_manifests(manifests), strict=True):
            if manifest is None:
                continue
            status = manifest.get("status")
            if status == "running" and run_stopped(manifest):
                status = "interrupted"
            experiment, run_id = run_path.rsplit("/", 2)[-2:]
            run = RemoteRun(run_path, experiment, run_id, manifest, status,
                            sorted(by_run[run_path]))
            if run_path in marked and merged.get(run_path):
                _read_swapped(run, merged[run_path])
            runs.append(run)
        return runs

    def find(self, runs: list[RemoteRun], ref: str, command: str,
             unfinished: bool = False) -> RemoteRun:
        """The run of ``runs`` named by ``ref``: a run id, or ``latest`` (the run that
        finished last with status ``ok``); a finished run unless ``unfinished``."""
        from evalkit.errors import EvalkitError

        if ref == "latest":
            done = [r for r in runs if r.status == "ok" and r.manifest.get("finished_at")]
            if not done:
                raise EvalkitError(f"{command}: no finished run under {self.shown}/; run an "
                                   "experiment there first or fix " + self.key)
            return max(done, key=lambda r: (str(r.manifest["finished_at"]), r.run_id))
        hits = [r for r in runs if r.run_id == ref or self.url_of(r.path) == shown_url(ref)]
        if len(hits) > 1:
            raise EvalkitError(f"{command}: run id '{ref}' is in several experiments "
                               f"({', '.join(self.url_of(h.path) for h in hits)}); pass the "
                               "run's URL")
        if not hits:
            raise EvalkitError(f"{command}: no run '{ref}' under {self.shown}/<experiment>/; "
                               "list runs with: evalkit query --runs-dir URL \"SELECT run_id, "
                               "experiment FROM runs\"")
        if not unfinished and hits[0].status != "ok":
            raise EvalkitError(f"{command}: run {self.url_of(hits[0].path)} is "
                               f"'{hits[0].status}', not finished: its tables may be partial "
                               "(pass --all-runs to use it as it is)")
        return hits[0]

    def _read_manifests(self, run_paths: list[str]) -> list[dict[str, Any] | None]:
        from concurrent.futures import ThreadPoolExecutor

        if len(run_paths) <= 1:
            return [self.read_json(f"{p}/manifest.json") for p in run_paths]
        with ThreadPoolExecutor(min(_MANIFEST_READERS, len(run_paths))) as pool:
            return list(pool.map(lambda p: self.read_json(f"{p}/manifest.json"), run_paths))

    def read_json(self, path: str) -> dict[str, Any] | None:
        """The JSON object at ``path``, or None when it is missing or not a JSON object."""
        import json

        try:
            with self.fs.open_input_stream(path) as f:
                data = json.loads(f.read())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def objects(self, path: str) -> list[pafs.FileInfo]:
        """Every object under ``path`` (one recursive listing), with its size and time."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
        try:
            return [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]
        except OSError as exc:
            raise _access_error(self.key, self.shown, self.shown, exc, None) from None

    def files_under(self, path: str) -> set[str]:
        """The paths of every object under ``path``."""
        return {i.path for i in self.objects(path)}

    def exists(self, path: str) -> bool:
        """Whether ``path`` is an object or holds one: an empty directory marker (pyarrow
        leaves one for the parent of an object it deletes on S3) holds nothing."""
        import pyarrow.fs as pafs

        try:
            if self.fs.get_file_info(path).type == pafs.FileType.File:
                return True
        except OSError as exc:
            raise _access_error(self.key, self.shown, self.shown, exc, None) from None
        return bool(self.files_under(path))

    def dataset(self, files: list[str], table: str) -> ds.Dataset:
        """One pyarrow dataset over Parquet ``files``, its schema the union of theirs by
        column name (as DuckDB's ``union_by_name``): a column an older run lacks is null.
        The footers are read at once (one or two requests each)."""
        from concurrent.futures import ThreadPoolExecutor

        import pyarrow as pa
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq

        def schema(path: str) -> pa.Schema:
            return pq.read_schema(path, filesystem=self.fs)

        try:
            with ThreadPoolExecutor(min(_MANIFEST_READERS, len(files))) as pool:
                schemas = list(pool.map(schema, files))
            unified = pa.unify_schemas(schemas, promote_options="permissive")
            return ds.dataset(files, schema=unified, format="parquet", filesystem=self.fs)
        except (OSError, pa.ArrowException) as exc:
            from evalkit.errors import QueryError

            raise QueryError(f"query: {table}: cannot read the runs at {self.shown} "
                             f"({error_reason(exc)})") from None

    def put(self, path: str, data: bytes) -> None:
        """Write ``data`` to the object at ``path`` (whole, or not at all: see :meth:`write`)."""
        import io

        self.write(io.BytesIO(data), path)

    def upload(self, local: Path, path: str) -> None:
        """Copy the local file ``local`` to ``path`` (whole, or not at all: see :meth:`write`)."""
        with open(local, "rb") as src:
            self.write(src, path, name=local.name, size=os.fstat(src.fileno()).st_size)

    def download(self, path: str, local: Path) -> None:
        """Copy the object at ``path`` to the local file ``local``. A failure is one
        :class:`~evalkit.errors.RunDirError` line naming :attr:`key` and the object."""
        import shutil

        try:
            with self.fs.open_input_stream(path) as src, open(local, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
        except OSError as exc:
            from evalkit.errors import RunDirError

            raise RunDirError(f"{self.key}: cannot download {self.url_of(path)} "
                              f"({error_reason(exc)[:200]}); check the storage and its "
                              "credentials, and run again") from None

    def download_all(self, items: list[tuple[str, Path]]) -> None:
        """:meth:`download` each ``(object, local file)`` of ``items``, several at once."""
        _at_once(self.download, items)

    def upload_all(self, items: list[tuple[Path, str]]) -> None:
        """:meth:`upload` each ``(local file, object)`` of ``items``, several at once."""
        _at_once(self.upload, items)

    def write(self, src: BinaryIO, path: str, name: str | None = None,
              size: int | None = None) -> None:
        """Write what ``src`` reads to the object at ``path``: under a hidden staging name
        beside it (:func:`staging_name`, which no reader lists), moved to ``path`` once the
        staged object is whole and of the size read (on S3 a server-side copy: the object
        appears whole or not at all). pyarrow's output stream has no abort (closing it
        after a failure publishes the bytes sent so far: apache/arrow#40502), so a write
        that fails is closed and its staging object deleted; one a lost connection leaves
        behind is removed by the next ``evalkit compact`` (:meth:`remove_staging`). An S3
        copy is one request of at most 5 GiB: a larger object (``size``) is written under
        its own name, and deleted if its write fails (readers read a run's files only once
        its manifest, uploaded last, says so). A failure is one
        :class:`~evalkit.errors.RunDirError` line naming :attr:`key` and the object
        (``name``: the local file's, when it differs from the object's)."""
        import pyarrow.fs as pafs

        parent, _, leaf = path.rpartition("/")
        direct = size is not None and size > _COPY_MAX and isinstance(self.fs,
                                                                       pafs.S3FileSystem)
        staging = path if direct else f"{parent}/{staging_name(leaf)}"
        try:
            if not isinstance(self.fs, pafs.S3FileSystem):  # (S3 has no directories)
                self.fs.create_dir(parent, recursive=True)
            dst = self.fs.open_output_stream(staging)
            sent = 0
            try:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
                    sent += len(chunk)
            except BaseException:
                self._abandon(dst, staging)
                raise
            dst.close()
            try:
                got = self.fs.get_file_info(staging).size
                if got != sent:
                    raise OSError(f"the store holds {got} of the {sent} bytes sent")
                if not direct:
                    self.fs.move(staging, path)
            except OSError:
                self._abandon(None, staging)
                raise
        except OSError as exc:
            from evalkit.errors import RunDirError

            raise RunDirError(f"{self.key}: cannot upload {name or leaf} to "
                              f"{self.url_of(path)} ({error_reason(exc)[:200]}); check the storage "
                              "and its credentials, and run again") from None

    def _abandon(self, dst: Any, staging: str) -> None:
        """Close a failed write's stream (publishing its staging object at worst) and delete
        that object; a failure here leaves it to :meth:`remove_staging`."""
        import contextlib

        with contextlib.suppress(OSError):
            if dst is not None:
                dst.close()
            self.fs.delete_file(staging)

    def remove_staging(self, objects: list[pafs.FileInfo], older_than_s: float) -> int:
        """Delete the staging objects (:func:`staging_name`) among ``objects`` (from
        :meth:`objects`) older than ``older_than_s`` seconds (younger ones may be a live
        write's, about to be moved); how many."""
        import contextlib

        now = time.time()
        removed = 0
        for info in objects:
            if not is_staging(info.base_name):
                continue
            if info.mtime is not None and now - info.mtime.timestamp() < older_than_s:
                continue
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(info.path)
                removed += 1
        return removed


def staging_name(name: str) -> str:
    """The hidden name an object ``name`` is written under before it is moved into place
    (the local writer's temporary-file pattern: ``.NAME.tmp-XXXX``)."""
    import uuid

    return f".{name}{_STAGING}{uuid.uuid4().hex[:12]}"


def is_staging(name: str) -> bool:
    """Whether an object's base name is a staging name (:func:`staging_name`)."""
    return name.startswith(".") and _STAGING in name


def _read_swapped(run: RemoteRun, merged: list[str]) -> None:
    """Read a run whose compaction committed from its merged judgments (they stand in for
    ``judgments/``, which the compaction is rewriting)."""
    judgments = f"{run.path}/judgments/"
    run.files = sorted([f for f in run.files if not f.startswith(judgments)] + merged)
    run.stand_in = {f: judgments + f.rsplit("/", 1)[1] for f in merged}


def writer_tag(heartbeat_s: float) -> dict[str, Any]:
    """Who writes a remote run (kept in its manifest), and how often it beats: readers on
    any machine can tell that a ``running`` run has stopped (:func:`run_stopped`)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "heartbeat_s": heartbeat_s}


def run_stopped(manifest: dict[str, Any], now: float | None = None) -> bool:
    """Whether the writer of a remote run whose manifest says ``running`` has stopped: its
    heartbeat is stale (:func:`heartbeat_stale`, from any machine), or it ran on this machine
    and its process has ended. A manifest without a heartbeat (written before there was
    one) is judged by the second rule alone."""
    return heartbeat_stale(manifest, now) or writer_gone(manifest.get("writer"))


def heartbeat_stale(manifest: dict[str, Any], now: float | None = None) -> bool:
    """Whether the manifest's ``heartbeat_at`` is older than :data:`STALE_BEATS` of its
    writer's ``heartbeat_s`` at ``now`` (a POSIX time; the clock of this machine when None).
    A missing or malformed heartbeat is not stale: nothing is known. The writer's clock is
    compared with this one: machines whose clocks differ by more than a few intervals
    (NTP keeps them within a second) would misjudge each other."""
    writer = manifest.get("writer")
    every = writer.get("heartbeat_s") if isinstance(writer, dict) else None
    at = manifest.get("heartbeat_at")
    if isinstance(every, bool) or not isinstance(every, (int, float)) or \
            not math.isfinite(every) or every <= 0 or not isinstance(at, str):
        return False
    try:
        beat = datetime.fromisoformat(at)
    except ValueError:
        return False
    if beat.tzinfo is None:
        return False
    return (time.time() if now is None else now) - beat.timestamp() > STALE_BEATS * every


def writer_gone(writer: object) -> bool:
    """Whether the process a remote run's manifest names as its writer is known to have
    ended: it ran on this machine and its pid is no process here."""
    if not isinstance(writer, dict) or writer.get("host") != socket.gethostname():
        return False  # another machine's process: it cannot be checked from here
    pid = writer.get("pid")
    return isinstance(pid, int) and pid > 0 and pid_gone(pid)


def publish_order(files: Iterable[Path], run_dir: Path) -> list[Path]:
    """The files of a staged run to upload, the manifest last; the lock, progress and
    temporary files (names starting with a dot) stay behind."""
    keep = [p for p in files if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(run_dir).parts)]
    return sorted(keep, key=lambda p: (p.name == "manifest.json", p.as_posix()))
