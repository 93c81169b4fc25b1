"""Writes one run directory. Every file is written under a temporary name and renamed into
place, so a reader (or a crash) never sees a partial file. Each judged batch is noted in
``.progress`` once its judgment parts are written, so a resumed run keeps those parts (see
:class:`Progress`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evalkit._faults import point
from evalkit.errors import EvalkitError, RunDirError
from evalkit.redact import mask_tree
from evalkit.results.columns import empty_select_sql, sql_literal
from evalkit.results.schemas import RECORDS, TABLES, conform

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "TEXT_COLUMNS", "UNIQUE_COLUMNS", "atomic_path", "judgments_view_sql", "parquet_options",
    "records_view_sql", "run_connection", "RunWriter", "write_json", "write_parquet",
]


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """A failure to write ``path`` (disk full, permission denied, a read-only file system)
    as one line naming it (:class:`RunDirError`) instead of a traceback."""
    try:
        yield
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc).splitlines()[0]
        raise RunDirError(f"runner.runs_dir: cannot write {path} ({reason}); free space or "
                          "fix its permissions, or set runner.runs_dir; a run stopped by this "
                          "is resumed with --resume RUN_ID") from exc


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write to; renamed onto ``path`` on success and
    removed on failure."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        if exc.filename is not None and os.fspath(exc.filename) not in (str(tmp), str(path)):
            raise
        # the error names the file being written, not its temporary name (or none: a
        # full disk's write() names nothing)
        raise OSError(exc.errno, exc.strerror or str(exc).splitlines()[0], str(path)) from exc
    finally:  # (a path that cannot hold the file cannot hold its temporary either)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            tmp.unlink()


# Columns whose values are (about) one per record: dictionary-encoding them only costs time
# (the writer hashes every value before it gives up on the dictionary; at 1M records, 0.2 s
# of 0.4 s for records.record_id and a third of the judgments' write), and DuckDB reads
# them the same either way. Every other column keeps the dictionary: models, statuses,
# labels and repeated prompts shrink with it.
UNIQUE_COLUMNS = frozenset({"record_id", "trace_id", "observation_id", "timestamp"})
# Free text (prompts, completions, explanations, JSON): no min/max statistics. No query
# filters on the smallest and largest prompt of a row group, and finding them compared every
# value (1M records: a fifth of the records' write). Ids, models, labels, numbers and times
# keep theirs, which DuckDB uses to skip row groups.
TEXT_COLUMNS = frozenset({"status_message", "input", "output", "context", "reference",
                          "final_output", "metadata", "exclude_reason", "explanation", "raw",
                          "error", "details", "message"})


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """How every run table is written: zstd, dictionaries where values repeat, statistics
    where a filter can use them."""
    return {"compression": "zstd",
            "use_dictionary": [n for n in schema.names if n not in UNIQUE_COLUMNS],
            "write_statistics": [n for n in schema.names if n not in TEXT_COLUMNS]}


def write_parquet(table: pa.Table, path: Path) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **parquet_options(table.schema))


def write_json(data: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


PROGRESS = ".progress"


@dataclass
class Progress:
    """The batches a run judged and wrote, one line each in ``.progress``: a digest of the
    batch's record ids and the number of judgment parts written once it was done. A line is
    appended after the batch's parts are in place, so a part past the last line belongs to a
    batch that was not finished; a line cut short by a crash is ignored."""

    batches: list[tuple[str, int]] = field(default_factory=list)  # (ids digest, parts)

    @property
    def parts(self) -> int:
        return self.batches[-1][1] if self.batches else 0

    @classmethod
    def read(cls, run_dir: Path) -> Progress:
        from evalkit.results.runfiles import RunFileError, read_small

        progress = cls()
        try:  # (a regular file of bounded size: a FIFO or a device never blocks a resume)
            text = read_small(run_dir / PROGRESS, 64 << 20).decode("utf-8", "replace")
        except FileNotFoundError:
            return progress
        except RunFileError as exc:
            raise EvalkitError(f"runner.resume: {exc}; remove it to judge the run again "
                               "from its start") from None
        for line in text.split("\n")[:-1]:  # the last piece is "" or a line cut short
            digest, _, parts = line.partition(" ")
            if not parts.isdigit():
                break
            progress.batches.append((digest, int(parts)))
        return progress

    def write(self, run_dir: Path) -> None:
        """Replace ``.progress`` with these lines (none: remove it)."""
        if not self.batches:
            with contextlib.suppress(FileNotFoundError):
                (run_dir / PROGRESS).unlink()
            return
        with atomic_path(run_dir / PROGRESS) as tmp:
            tmp.write_text("".join(f"{d} {n}\n" for d, n in self.batches))


def ids_digest(ids: pa.ChunkedArray | pa.Array) -> str:
    """A digest of a batch's record ids (their bytes and lengths, whatever the chunking)."""
    data, lengths = hashlib.blake2b(digest_size=16), hashlib.blake2b(digest_size=16)
    chunks = ids.chunks if isinstance(ids, pa.ChunkedArray) else [ids]
    for chunk in chunks:
        if not len(chunk):
            continue
        chunk = chunk.cast(pa.string()) if chunk.type != pa.string() else chunk
        _, offsets_buf, data_buf = chunk.buffers()
        offsets = np.frombuffer(offsets_buf, np.int32)[chunk.offset:chunk.offset + len(chunk) + 1]
        lengths.update(np.diff(offsets).tobytes())
        data.update(memoryview(data_buf)[offsets[0]:offsets[-1]])
    return data.hexdigest() + lengths.hexdigest()


class RunWriter:
    """The files of one run: ``records.parquet`` (streamed), ``judgments/part-*.parquet`` (one
    part per batch and judge, each complete on its own), ``metrics``, ``alerts``, ``rejects``
    and ``manifest.json``. Given the :class:`Progress` of a run being resumed, it keeps that
    run's finished batches' parts (and counts them) and numbers its own parts after them."""

    def __init__(self, run_dir: Path, progress: Progress | None = None) -> None:
        self.run_dir = run_dir
        self.judgments_dir = run_dir / "judgments"
        with writing(self.judgments_dir):
            self.judgments_dir.mkdir(parents=True, exist_ok=True)
        self._records_path = run_dir / "records.parquet"
        self._records_tmp = run_dir / f".records.parquet.tmp-{os.getpid()}"
        self._records: pq.ParquetWriter | None = None
        self._parts = 0
        self.n_records = 0
        self.n_judgments = 0
        # (judge, status) -> [judgments, summed cost or None, ok computed calls without a price]
        self.judgment_stats: dict[tuple[str, str], list[Any]] = {}
        # judge -> error cause (judgments.error_cause; "other" when a judge gave none) -> count
        self.error_causes: dict[str, dict[str, int]] = {}
        self.judgments_cached: dict[str, int] = {}  # judge -> judgments served by the cache
        self.n_repeats = 0  # extra judgments of runner.repeats
        self._batch_repeats = 0  # repeat parts written for the batch being judged
        self._progress = progress or Progress()
        # called once a batch's parts and its progress line are written (a run on object
        # storage uploads them then, so a resume elsewhere keeps them)
        self.on_batch_done: Callable[[], None] | None = None
        self.kept_batches = len(self._progress.batches)
        self._batches_done = self.kept_batches
        for k in range(self._progress.parts):
            self._add_kept(self.judgments_dir / f"part-{k:05d}.parquet")

    def _add_kept(self, path: Path) -> None:
        table = pq.read_table(path, columns=["judge", "status", "cost_usd", "origin",
                                             "judge_model", "error_cause"])
        self._parts += 1
        self.n_judgments += table.num_rows
        self._count(table)

    def check_kept(self, index: int, ids: pa.ChunkedArray) -> None:
        """Raise unless batch ``index``, read again, holds the records it held when its kept
        judgments were written."""
        if ids_digest(ids) != self._progress.batches[index][0]:
            raise EvalkitError(f"runner.resume: the input changed since this run stopped "
                               f"(batch {index + 1} holds other records than before); start "
                               "a new run instead of resuming")

    def end_batch(self, ids: pa.ChunkedArray) -> None:
        """Note that the batch of records ``ids`` has all its judgment parts written."""
        self._batches_done += 1
        self._batch_repeats = 0
        line = f"{ids_digest(ids)} {self._parts}\n"
        with writing(self.run_dir / PROGRESS), open(self.run_dir / PROGRESS, "a") as f:
            f.write(line)
        if self.on_batch_done is not None:
            self.on_batch_done()
        point("batch_done")

    def add_records(self, table: pa.Table) -> None:
        with writing(self._records_path):
            if self._records is None:
                self._records = pq.ParquetWriter(self._records_tmp, RECORDS,
                                                **parquet_options(RECORDS))
            self._records.write_table(table)
        self.n_records += table.num_rows
        point("records_written")

    def add_judgments(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        path = self.judgments_dir / f"part-{self._parts:05d}.parquet"
        with writing(path):
            write_parquet(table, path)
        self._parts += 1
        self.n_judgments += table.num_rows
        self._count(table)
        point("judgment_part")

    def add_repeats(self, table: pa.Table) -> None:
        """Write the extra judgments of ``runner.repeats`` (``repeat`` ≥ 1) of the batch being
        judged as ``judgments/repeat-BBBBB-SSS.parquet``, B the batch, S the part within it:
        a resumed run judging the batch again writes the same names over them. They stay
        out of the ``judgments`` table and of the manifest's counts."""
        if not table.num_rows:
            return
        name = f"repeat-{self._batches_done:05d}-{self._batch_repeats:03d}.parquet"
        path = self.judgments_dir / name
        with writing(path):
            write_parquet(table, path)
        self._batch_repeats += 1
        self.n_repeats += table.num_rows

    def _count(self, table: pa.Table) -> None:
        """Add ``table``'s judgments to :attr:`judgment_stats` (what the manifest and the
        summary report, without reading the parts back)."""
        unpriced = pc.fill_null(pc.and_(
            pc.and_(pc.is_null(table["cost_usd"]), pc.equal(table["status"], "ok")),
            pc.and_(pc.equal(table["origin"], "computed"), pc.is_valid(table["judge_model"]))),
            False)
        # the spend of this run: an answer served from the cache keeps the cost it was
        # bought at (judgments.cost_usd, for cost per success), but was not paid again
        paid = pc.if_else(pc.fill_null(pc.equal(table["origin"], "cache"), False),
                          pa.scalar(None, pa.float64()), table["cost_usd"])
        grouped = table.select(["judge", "status"]).append_column("cost_usd", paid).append_column(
            "unpriced", pc.cast(unpriced, pa.int64())).group_by(["judge", "status"]).aggregate(
            [([], "count_all"), ("cost_usd", "sum"), ("unpriced", "sum")])
        cached = table.filter(pc.equal(table["origin"], "cache")).column("judge")
        for item in pc.value_counts(cached).to_pylist():
            judge = item["values"]
            self.judgments_cached[judge] = self.judgments_cached.get(judge, 0) + item["counts"]
        rows = grouped.to_pylist()
        for row in rows:
            acc = self.judgment_stats.setdefault((row["judge"], row["status"]), [0, None, 0])
            acc[0] += row["count_all"]
            if row["cost_usd_sum"] is not None:
                acc[1] = (acc[1] or 0.0) + row["cost_usd_sum"]
            acc[2] += row["unpriced_sum"]
        if any(row["status"] == "error" for row in rows):
            errors = table.select(["judge", "status", "error_cause"]).filter(
                pc.equal(table["status"], "error"))
            for row in errors.group_by(["judge", "error_cause"]).aggregate(
                    [([], "count_all")]).to_pylist():
                causes = self.error_causes.setdefault(row["judge"], {})
                cause = row["error_cause"] or "other"
                causes[cause] = causes.get(cause, 0) + row["count_all"]

    def judge_spend(self) -> tuple[float | None, int]:
        """``(what this run's judge calls cost, judgments with no known price)``: the cost
        is None, never 0, when judgments were made and none had a known price (a
        self-hosted or new model); with a mix it is the priced part, and the count of
        unpriced ones says it is a lower bound."""
        cost: float | None = None
        unpriced = 0
        for _n, c, u in self.judgment_stats.values():
            if c is not None:
                cost = (cost or 0.0) + c
            unpriced += u
        if cost is None and not unpriced:
            cost = 0.0  # no priced call because no call (deterministic judges, offline)
        return cost, unpriced

    def finish_records(self) -> None:
        """Close and publish ``records.parquet`` (an empty table if no batch came)."""
        with writing(self._records_path):
            if self._records is None:
                write_parquet(RECORDS.empty_table(), self._records_path)
                return
            self._records.close()
            self._records = None
            os.replace(self._records_tmp, self._records_path)
        point("records_finished")

    def write_table(self, name: str, table: pa.Table | list[dict[str, Any]]) -> pa.Table:
        table = conform(table, TABLES[name])
        with writing(self.run_dir / f"{name}.parquet"):
            write_parquet(table, self.run_dir / f"{name}.parquet")
        return table

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        # every string masked: an error message may quote a URL or a key (the config in it
        # is masked by name already)
        with writing(self.run_dir / "manifest.json"):
            write_json(mask_tree(manifest, by_name=False), self.run_dir / "manifest.json")

    def forget_progress(self) -> None:
        """Remove ``.progress`` (the run is complete: nothing is left to resume)."""
        with writing(self.run_dir / PROGRESS), contextlib.suppress(FileNotFoundError):
            (self.run_dir / PROGRESS).unlink()

    def abort(self) -> None:
        """Remove whatever temporary file is still open after a failure."""
        if self._records is not None:
            with contextlib.suppress(Exception):
                self._records.close()
            self._records = None
        with contextlib.suppress(FileNotFoundError):
            self._records_tmp.unlink()


def judgments_view_sql(run_dir: Path, prefix: str = "part") -> str:
    """SQL reading a run's judgment parts (or an empty judgments table when there are none);
    ``prefix`` ``repeat``: the extra judgments of ``runner.repeats`` instead."""
    parts = sorted((run_dir / "judgments").glob(f"{prefix}-*.parquet"))
    if not parts:
        return empty_select_sql("judgments")
    files = ", ".join(sql_literal(str(p)) for p in parts)
    return f"SELECT * FROM read_parquet([{files}], union_by_name=true)"


def records_view_sql(run_dir: Path) -> str:
    """SQL reading a run's records."""
    return f"SELECT * FROM read_parquet({sql_literal(str(run_dir / 'records.parquet'))})"


def run_connection(run_dir: Path) -> duckdb.DuckDBPyConnection:
    """DuckDB (in memory) with one finished run's ``records``, ``judgments`` and
    ``included`` (records no filter set aside) as views: what metrics, sinks, labels and the
    report read. It reads no file outside ``run_dir``: a run handed to ``report`` or
    ``push`` may hold a link to any file (DuckDB resolves links and refuses those that
    leave), and no setting can turn that back on."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET allowed_directories = [{sql_literal(str(Path(run_dir).resolve()))}]")
    con.execute("SET enable_external_access = false")
    try:
        con.execute(f"CREATE VIEW records AS {records_view_sql(run_dir)}")
        con.execute(f"CREATE VIEW judgments AS {judgments_view_sql(run_dir)}")
        con.execute(f"CREATE VIEW repeats AS {judgments_view_sql(run_dir, 'repeat')}")
    except duckdb.PermissionException as exc:
        con.close()
        from evalkit.results.runfiles import RunFileError

        where = str(exc).partition('"')[2].partition('"')[0] or str(run_dir)
        raise RunFileError(f"{where}: leads outside the run directory {run_dir} (a symbolic "
                           "link?); a run's files must be inside it") from None
    con.execute("CREATE VIEW included AS SELECT * FROM records WHERE excluded_by IS NULL")
    return con
