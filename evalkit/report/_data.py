"""What a report shows, read from run directories with DuckDB: the manifest, every metric and
alert row, what the filters set aside, the judges' score distributions, two judges' scores
for a scatter, the review queues and the records for the drill-down (bounded, saying what was
cut). Nothing here draws or formats: :mod:`evalkit.report._page` does."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import EvalkitError

HIST_BINS = 20
MAX_LABELS = 30  # a judge with more distinct labels than this gets no label chart
SCATTER_POINTS = 3000  # points drawn in the scatter of two judges (a seeded sample beyond)
MAX_REVIEW_ROWS = 200  # rows of a disagreement queue shown


@dataclass(frozen=True)
class Limits:
    """How much of a run the page embeds for the drill-down."""

    max_records: int = 100_000  # records in the drill-down (the first ones, in run order)
    text_chars: int = 1_000  # characters kept of each input, output, context, explanation
    exchange_bytes: int = 16_000_000  # total size of the judges' exchanges embedded


@dataclass
class JudgeDist:
    """One judge's scores, raw (every record) beside filtered (included records)."""

    name: str
    statuses: dict[str, int]
    lo: float = 0.0
    hi: float = 1.0
    raw: list[int] = field(default_factory=list)  # histogram counts over HIST_BINS bins
    filtered: list[int] = field(default_factory=list)
    labels: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> (raw, filtered)


@dataclass
class RunData:
    run_dir: Path
    manifest: dict[str, Any]
    metrics: list[dict[str, Any]]  # metric rows, details parsed
    alerts: list[dict[str, Any]]
    exclusions: list[dict[str, Any]]  # excluded_by, exclude_reason, n
    judges: list[JudgeDist]
    scatter: dict[str, Any] | None
    review: dict[str, dict[str, Any]]  # disagreements metric -> {rows, n}
    drill: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id", self.run_dir.name))

    @property
    def experiment(self) -> str:
        return str(self.manifest.get("experiment", self.run_dir.parent.name))

    @property
    def offline_judges(self) -> list[str]:
        """Judges that scored without a model (deterministic stand-ins, not judgments)."""
        return list(self.manifest.get("offline_judges") or [])

    def is_offline(self, metric: str) -> bool:
        """Whether metric row ``metric`` rests on an offline judge's stand-ins (its instance,
        the row name or the part before the first dot, reads one of them)."""
        offline = set(self.offline_judges)
        if not offline:
            return False
        configs = (self.manifest.get("config") or {}).get("metrics") or {}
        conf = configs.get(metric) or configs.get(metric.split(".", 1)[0]) or {}
        return bool(offline & {conf.get(k) for k in ("judge", "judge_a", "judge_b")})


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """``run_dir``'s manifest, checked (:mod:`evalkit.results.runfiles`); one line if not."""
    from evalkit.results.runfiles import RunFileError, load_manifest

    try:
        return load_manifest(run_dir)
    except FileNotFoundError:
        raise EvalkitError(f"report: {run_dir} is not a run directory (no manifest.json)") \
            from None
    except RunFileError as exc:
        raise EvalkitError(f"report: {exc}") from None


def _details(text: Any) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    return value if isinstance(value, dict) else {"value": value}


def _rows(con: Any, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _finite(v: Any) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


def load_run(run_dir: Path, limits: Limits) -> RunData:
    """Everything the page shows of one finished (or failed) run."""
    from evalkit.results.runfiles import RunFileError, check_run_tables
    from evalkit.results.writer import run_connection

    manifest = read_manifest(run_dir)
    try:
        check_run_tables(run_dir)
    except RunFileError as exc:
        raise EvalkitError(f"report: {exc}") from None
    if not (run_dir / "records.parquet").exists():
        raise EvalkitError(f"report: run {run_dir} has no records.parquet (status "
                           f"'{manifest.get('status')}'); report a finished run")
    con = run_connection(run_dir)
    con.execute("SET enable_progress_bar = false")
    try:
        metrics = []
        if (run_dir / "metrics.parquet").exists():
            path = _q(run_dir / "metrics.parquet")
            for row in _rows(con, f"SELECT * FROM read_parquet('{path}')"):
                row["details"] = _details(row.get("details"))
                metrics.append(row)
        alerts = []
        if (run_dir / "alerts.parquet").exists():
            path = _q(run_dir / "alerts.parquet")
            alerts = _rows(con, f"SELECT * FROM read_parquet('{path}')")
        exclusions = _rows(con, "SELECT excluded_by, exclude_reason, count(*) AS n FROM records "
                                "WHERE excluded_by IS NOT NULL GROUP BY ALL "
                                "ORDER BY n DESC, excluded_by, exclude_reason LIMIT 200")
        has_judgments = _has_judgments(con)
        judges = _judge_dists(con, manifest) if has_judgments else []
        scatter = _scatter(con, metrics) if has_judgments else None
        review = _review(run_dir, metrics)
        drill = _drill(con, limits, has_judgments)
    finally:
        con.close()
    return RunData(run_dir, manifest, metrics, alerts, exclusions, judges, scatter, review,
                   drill)


def _q(path: Path) -> str:
    return str(path).replace("'", "''")


def _has_judgments(con: Any) -> bool:
    try:
        con.execute("SELECT 1 FROM judgments LIMIT 0")
    except Exception:  # a run without judges has no judgment parts
        return False
    return True


def _judge_dists(con: Any, manifest: dict[str, Any]) -> list[JudgeDist]:
    """Histograms and label counts of every judge's usable judgments, over every record and
    over the included ones (a judgment of an excluded record is found by a join against the
    excluded records' ids only: usually few, never the whole records table). The status
    counts come from the manifest."""
    con.execute("CREATE TEMP TABLE gone AS SELECT record_id FROM records "
                "WHERE excluded_by IS NOT NULL")
    con.execute("CREATE TEMP TABLE jr AS SELECT j.judge, j.value, j.label, "
                "g.record_id IS NULL AS included FROM (SELECT record_id, judge, value, label "
                "FROM judgments WHERE status = 'ok') j LEFT JOIN gone g USING (record_id)")
    out = {name: JudgeDist(name, dict(statuses))
           for name, statuses in (manifest.get("judgments") or {}).items()}
    for (name,) in con.execute("SELECT DISTINCT judge FROM jr").fetchall():
        out.setdefault(name, JudgeDist(name, {}))
    con.execute(f"""CREATE TEMP TABLE hist AS
        SELECT judge, included, least(greatest(floor((value - s.lo) / (s.hi - s.lo)
               * {HIST_BINS}), 0), {HIST_BINS - 1})::INT AS b, count(*) AS n, s.lo, s.hi
        FROM jr JOIN (SELECT judge, least(0, min(value)) AS lo, greatest(1, max(value)) AS hi
                      FROM jr WHERE isfinite(value) GROUP BY judge) s USING (judge)
        WHERE isfinite(value) GROUP BY ALL""")
    for row in _rows(con, "SELECT * FROM hist"):
        dist = out[row["judge"]]
        if not dist.raw:
            dist.lo, dist.hi = row["lo"], row["hi"]
            dist.raw, dist.filtered = [0] * HIST_BINS, [0] * HIST_BINS
        dist.raw[row["b"]] += row["n"]
        if row["included"]:
            dist.filtered[row["b"]] += row["n"]
    labels = _rows(con, f"""
        SELECT judge, label, count(*) AS raw, count(*) FILTER (WHERE included) AS filtered
        FROM jr WHERE label IS NOT NULL AND judge IN (
            SELECT judge FROM jr WHERE label IS NOT NULL GROUP BY judge
            HAVING approx_count_distinct(label) <= {MAX_LABELS})
        GROUP BY ALL ORDER BY judge, raw DESC, label""")
    for row in labels:
        out[row["judge"]].labels[row["label"]] = (row["raw"], row["filtered"])
    con.execute("DROP TABLE jr; DROP TABLE gone; DROP TABLE hist")
    return list(out.values())


def _scatter(con: Any, metrics: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Two judges' scores on the records both scored: the first agreement metric between two
    judges (not a judge and the human labels)."""
    pair = next(((m["details"].get("a"), m["details"].get("b")) for m in metrics
                 if m.get("plugin") == "agreement" and m["slice"] == "all"
                 and m["details"].get("a") and m["details"].get("b")
                 and m["details"].get("b") != "human_label"), None)
    if pair is None:
        return None
    a, b = pair
    both = ("FROM judgments x JOIN judgments y USING (record_id) WHERE x.judge = ? AND "
            "y.judge = ? AND x.status = 'ok' AND y.status = 'ok' AND isfinite(x.value) AND "
            "isfinite(y.value)")
    (n,) = con.execute(f"SELECT count(*) {both}", [a, b]).fetchone()
    if not n:
        return None
    sample = "" if n <= SCATTER_POINTS else \
        f" USING SAMPLE reservoir({SCATTER_POINTS} ROWS) REPEATABLE (7)"
    pts = con.execute(f"SELECT x.value, y.value {both}{sample}", [a, b]).fetchall()
    return {"a": a, "b": b, "n": n, "x": [p[0] for p in pts], "y": [p[1] for p in pts]}


def _review(run_dir: Path, metrics: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    import pyarrow.parquet as pq

    from evalkit.errors import ConfigError
    from evalkit.results.names import check_name
    from evalkit.results.runfiles import leaves, skipped

    out: dict[str, dict[str, Any]] = {}
    for m in metrics:
        if m.get("plugin") != "disagreements" or m["slice"] != "all" or m["metric"] in out:
            continue
        # the metric's name is read from the run: a name, never a path out of it
        try:
            check_name(m["metric"], "metric", "metric name")
        except ConfigError as exc:
            skipped(f"{run_dir / 'metrics.parquet'}: {exc}; its review queue")
            continue
        path = run_dir / "review" / f"{m['metric']}.parquet"
        if not path.exists():
            continue
        if leaves(run_dir, path):
            skipped(f"{leaves(run_dir, path)}; its review queue")
            continue
        f = pq.ParquetFile(path)
        n = f.metadata.num_rows
        table = f.read().slice(0, MAX_REVIEW_ROWS)
        out[m["metric"]] = {"rows": table.to_pylist(), "n": n}
    return out


def _text(col: str, limit: int) -> str:
    """SQL: ``col`` cut to ``limit`` characters, saying how many were cut."""
    return (f"CASE WHEN length({col}) > {limit} THEN left({col}, {limit}) || '… [' || "
            f"(length({col}) - {limit}) || ' characters cut]' ELSE {col} END")


RECORD_FIELDS = ("record_id", "model", "level", "excluded_by", "exclude_reason", "input",
                 "question", "output", "context", "reference", "human_label", "outcome",
                 "latency_s", "cost_usd", "timestamp")
# the drill-down table's input column: the last user message of an input that is a message
# list (a system prompt comes first and would fill the cell), else the input; the record's
# detail keeps the whole input
_LAST_USER = ("list_filter(CAST(json(input) AS JSON[]), m -> "
              "json_extract_string(m, '$.role') = 'user')[-1]")
_QUESTION = (f"CASE WHEN left(ltrim(input), 1) = '[' AND json_valid(input) THEN coalesce("
             f"json_extract_string({_LAST_USER}, '$.content[0].text'), "  # content parts
             f"json_extract_string({_LAST_USER}, '$.content'), input) ELSE input END")
_LONG = {"input", "output", "context", "reference", "exclude_reason"}


def _drill(con: Any, limits: Limits, has_judgments: bool) -> dict[str, Any]:
    """The drill-down's data as JSON text, column by column: the first ``max_records``
    records with every judge's judgment of each (aligned to the records), long texts cut to
    ``text_chars``, the judges' exchanges kept while ``exchange_bytes`` lasts. DuckDB builds
    the JSON itself (no Python object per value: 100,000 records in a fraction of the time)."""
    import orjson

    (total,) = con.execute("SELECT count(*) FROM records").fetchone()
    L = limits.text_chars
    cols = []
    for c in RECORD_FIELDS:
        if c == "context":
            joined = "array_to_string(context, chr(10) || '───' || chr(10))"
            cols.append(f"{_text(joined, L)} AS context")
        elif c == "timestamp":
            cols.append("strftime(timestamp, '%Y-%m-%dT%H:%M:%SZ') AS timestamp")
        elif c == "question":
            cols.append(f"{_text(_QUESTION, L)} AS question")
        elif c in ("latency_s", "cost_usd"):
            cols.append(f"CASE WHEN isfinite({c}) THEN {c} END AS {c}")
        elif c in _LONG:
            cols.append(f"{_text(c, L)} AS {c}")
        else:
            cols.append(c)
    con.execute(f"CREATE TEMP TABLE shown AS SELECT row_number() OVER () - 1 AS i, "
                f"{', '.join(cols)} FROM (SELECT * FROM records LIMIT {limits.max_records})")
    (n,) = con.execute("SELECT count(*) FROM shown").fetchone()
    if not n:
        con.execute("DROP TABLE shown")
        records = orjson.dumps({c: [] for c in RECORD_FIELDS})
        return {"total": total, "shown": 0, "text_chars": L, "exchange_cut": 0,
                "max_records": limits.max_records,
                "json": b'{"records":' + records + b',"judges":{},"shown":0,"total":'
                        + str(total).encode() + b"}"}
    records = con.execute("SELECT to_json({" + ", ".join(
        f"'{c}': list({c} ORDER BY i)" for c in RECORD_FIELDS) + "}) FROM shown").fetchone()[0]
    judges: list[bytes] = []
    exchange_cut = 0
    if has_judgments:
        jcols = {r[0] for r in con.execute("DESCRIBE judgments").fetchall()}
        exch = "j.exchange" if "exchange" in jcols else "NULL::VARCHAR"
        budget = limits.exchange_bytes
        names = [r[0] for r in con.execute("SELECT DISTINCT judge FROM judgments "
                                            "ORDER BY judge").fetchall()]
        cause = "j.error_cause" if "error_cause" in jcols else "NULL::VARCHAR"
        fields = ("value", "label", "passed", "status", "origin", "explanation", "error",
                  "error_cause", "raw")
        for judge in names:
            # one row per shown record, in its order (a record judged twice by the same
            # judge, as a rerun of imported scores can be, shows its first judgment); the
            # exchanges are kept in record order while the budget lasts
            text, cut, used = con.execute(
                f"""WITH jj AS (
                    SELECT s.i, CASE WHEN isfinite(j.value) THEN j.value END AS value,
                           j.label, j.passed, j.status, j.origin,
                           {_text('j.explanation', L)} AS explanation,
                           {_text('j.error', L)} AS error, {cause} AS error_cause,
                           {_text('j.raw', L * 4)} AS raw,
                           {exch} AS exchange
                    FROM shown s LEFT JOIN (SELECT * FROM judgments WHERE judge = $judge) j
                         USING (record_id)
                    QUALIFY row_number() OVER (PARTITION BY s.i) = 1),
                jw AS (SELECT *, sum(coalesce(length(exchange), 0)) OVER (
                           ORDER BY i ROWS UNBOUNDED PRECEDING) AS used FROM jj)
                SELECT to_json({{{', '.join(f"'{f}': list({f} ORDER BY i)" for f in fields)},
                               'exchange': list(CASE WHEN used <= $budget THEN exchange END
                                                ORDER BY i)}}),
                       count(*) FILTER (WHERE exchange IS NOT NULL AND used > $budget),
                       coalesce(sum(length(exchange)) FILTER (WHERE used <= $budget), 0)
                FROM jw""", {"judge": judge, "budget": budget}).fetchone()
            exchange_cut += cut
            budget -= used
            judges.append(orjson.dumps(judge) + b":" + text.encode())
    con.execute("DROP TABLE shown")
    data = (b'{"records":' + records.encode() + b',"judges":{' + b",".join(judges)
            + b'},"shown":' + str(n).encode() + b',"total":' + str(total).encode() + b"}")
    return {"total": total, "shown": n, "text_chars": L, "exchange_cut": exchange_cut,
            "max_records": limits.max_records, "json": data}
