"""Where labels live: ``<runs_dir>/_labels/``, beside the runs, since a label belongs to a
record (by ``record_id``) and not to the run that first showed it.

- ``part-*.parquet``: the labels table (:data:`LABELS`), one part per import, appended under
  a lock and written under a temporary name, so a reader sees whole imports only;
- ``samples/<sample_id>.parquet``: the records a ``evalkit label sample`` drew, each with its
  inclusion probability (:data:`SAMPLES`)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from evalkit.errors import LabelError
from evalkit.results.schemas import TABLES, conform
from evalkit.results.writer import write_parquet

__all__ = ["LABELS", "LABELS_DIR", "SAMPLES", "append_labels", "labels_dir", "labels_lock",
           "read_labels", "read_sample", "write_sample"]

LABELS_DIR = "_labels"
LABELS = TABLES["labels"]
SAMPLES = pa.schema([
    ("sample_id", pa.string()),
    ("run_id", pa.string()),  # the run whose records were drawn from
    ("judge", pa.string()),
    ("record_id", pa.string()),
    ("design", pa.string()),  # random, stratified, active
    ("inclusion_prob", pa.float64()),
    ("stratum", pa.string()),
    ("population", pa.int64()),  # records eligible for the draw
    ("seed", pa.int64()),
])


def labels_dir(runs_dir: Path | str) -> Path:
    """The labels directory of a runs directory."""
    return Path(runs_dir) / LABELS_DIR


def read_labels(runs_dir: Path | str, judge: str | None = None) -> pa.Table:
    """Every label under ``runs_dir`` (of ``judge`` only, when given), as :data:`LABELS`."""
    parts = sorted(labels_dir(runs_dir).glob("part-*.parquet"))
    if not parts:
        return LABELS.empty_table()
    try:
        table = pa.concat_tables([conform(pq.read_table(p), LABELS) for p in parts])
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise LabelError(f"labels: cannot read {labels_dir(runs_dir)}: "
                         f"{str(exc).splitlines()[0]}") from None
    if judge is not None:
        table = table.filter(pa.compute.equal(table.column("judge"), judge))
    return table


@contextlib.contextmanager
def labels_lock(runs_dir: Path | str) -> Iterator[None]:
    """Held while labels are checked and appended, so two imports cannot both pass the
    duplicate check and then both append."""
    import fcntl

    where = labels_dir(runs_dir)
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd = os.open(where / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as exc:
        raise LabelError(f"labels: cannot write {where} ({exc.strerror}); fix its permissions "
                         "or pass --runs-dir") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def append_labels(runs_dir: Path | str, table: pa.Table) -> Path:
    """Write ``table`` (conformed to :data:`LABELS`) as a new part; hold
    :func:`labels_lock` around the check that precedes it."""
    from datetime import datetime, timezone

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    path = labels_dir(runs_dir) / f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
    write_parquet(conform(table, LABELS), path)
    return path


def write_sample(runs_dir: Path | str, table: pa.Table) -> Path:
    """Store a drawn sample (:data:`SAMPLES`) under its ``sample_id``."""
    sample_id = table.column("sample_id")[0].as_py()
    path = labels_dir(runs_dir) / "samples" / f"{sample_id}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(conform(table, SAMPLES), path)
    return path


def read_sample(runs_dir: Path | str, sample_id: str) -> pa.Table:
    """The drawn sample ``sample_id``; a one-line error naming the samples there when it is
    not one of them."""
    where = labels_dir(runs_dir) / "samples"
    path = where / f"{sample_id}.parquet"
    if "/" in sample_id or not path.is_file():
        known = sorted(p.stem for p in where.glob("*.parquet"))
        raise LabelError(f"no label sample '{sample_id}' under {where}; samples: "
                         f"{', '.join(known) or 'none (draw one with evalkit label sample)'}")
    return conform(pq.read_table(path), SAMPLES)
