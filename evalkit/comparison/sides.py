"""One side of a shadow run (``generate:``) as a run of its own, so that every comparison
reads "recorded vs candidate" within one run exactly as it reads two runs:
``evalkit compare RUN:recorded RUN:candidate`` (or any side against any run).

A side's view holds the run's records of that side and their judgments, each under the
recorded record's id (the candidate's ``::candidate`` suffix removed), with ``side`` null as
in a run without a candidate, and the run's manifest (its config, so that the metrics are
recomputed as the run computed them). It is written to a scratch directory and removed
with it."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.errors import EvalkitError

__all__ = ["SIDES", "side_view", "split_side"]

SIDES = ("recorded", "candidate")
_SUFFIX = "::candidate"


def split_side(ref: str) -> tuple[str, str | None]:
    """``RUN:side`` as ``(RUN, side)``; anything else as ``(ref, None)``."""
    head, colon, tail = ref.rpartition(":")
    if colon and head and tail in SIDES:
        return head, tail
    return ref, None


def side_view(run_dir: Path, side: str, scratch: Path) -> Path:
    """A run directory under ``scratch`` holding the ``side`` of the shadow run ``run_dir``."""
    import duckdb

    from evalkit.results.writer import judgments_view_sql

    if side not in SIDES:
        raise EvalkitError(f"compare: side '{side}' is not one of {', '.join(SIDES)}")
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    view = scratch / f"{run_dir.name}:{side}"
    view.mkdir(parents=True)
    con = duckdb.connect()
    try:
        records = str(run_dir / "records.parquet").replace("'", "''")
        con.execute(f"CREATE VIEW r AS SELECT * FROM read_parquet('{records}', "
                    "union_by_name = true)")
        if "side" not in [c for (c, *_) in con.execute("DESCRIBE r").fetchall()] or \
                not con.execute("SELECT count(*) FROM r WHERE side = ?", [side]).fetchone()[0]:
            raise EvalkitError(f"compare: run {run_dir.name} has no {side} records; "
                               f"RUN:{side} names a side of a shadow run (generate: in its "
                               "config, docs/shadow.md)")
        strip = f"regexp_replace(record_id, '{_SUFFIX}$', '')"
        out = str(view / "records.parquet").replace("'", "''")
        con.execute(f"COPY (SELECT * REPLACE ({strip} AS record_id, NULL::VARCHAR AS side) "
                    f"FROM r WHERE side = ?) TO '{out}' (FORMAT parquet)", [side])
        con.execute(f"CREATE VIEW j AS {judgments_view_sql(run_dir)}")
        (view / "judgments").mkdir()
        out = str(view / "judgments" / "part-00000.parquet").replace("'", "''")
        con.execute(f"COPY (SELECT j.* REPLACE ({strip.replace('record_id', 'j.record_id')} "
                    "AS record_id) FROM j SEMI JOIN r ON r.record_id = j.record_id AND "
                    f"r.side = ?) TO '{out}' (FORMAT parquet)", [side])
    finally:
        con.close()
    manifest["run_id"] = f"{manifest.get('run_id')}:{side}"
    (view / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return view

