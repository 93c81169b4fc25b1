"""``evalkit label import``: a labels file (JSONL, CSV or Parquet) checked against the runs
it labels, then appended to the labels table, whole or not at all.

Each row needs ``record_id``, ``judge``, ``value`` or ``label``, and ``labeler``; it may give
``labelled_at`` (ISO-8601), ``source``, ``run_id`` (the run whose output was
labelled; empty: the record's output in any run), ``sample_id`` (a sample drawn by ``evalkit label
sample``: the design and inclusion probability then come from it) or ``design`` and
``inclusion_prob``. A row is refused, in one line naming the file and line, when its record
is in no finished run, its judge judged nothing there, its value is outside the judge's
scale, it contradicts another row or a stored label of the same record, judge and labeler,
or a key is unknown."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.errors import LabelError
from evalkit.labels.store import LABELS, append_labels, labels_lock, read_labels, read_sample

__all__ = ["DESIGNS", "ImportResult", "JudgeScale", "import_labels", "judge_scales",
           "read_label_file"]

DESIGNS = ("census", "random", "stratified", "active")
"""Probability designs: labels drawn by one of them estimate; any other label validates."""
KEYS = ("record_id", "judge", "value", "label", "labeler", "labelled_at", "source",
        "sample_id", "design", "inclusion_prob", "stratum", "run_id")
MAX_BYTES = 256 << 20  # a labels file is hand-made or exported: larger is a mistake


@dataclass
class JudgeScale:
    """What a judge's verdicts look like in the runs: a numeric range and the labels seen."""

    low: float | None = None
    high: float | None = None
    labels: set[str] = field(default_factory=set)

    def refuse(self, value: float | None, label: str | None) -> str | None:
        if value is not None:
            if self.low is None:
                return "the judge gives labels, not values: give label"
            if not self.low <= value <= self.high:
                return f"value {value:g} is outside the judge's scale [{self.low:g}, " \
                       f"{self.high:g}]"
        if label is not None and self.labels and label not in self.labels:
            return f"label {label!r} is not one of the judge's labels " \
                   f"({', '.join(sorted(self.labels))})"
        if label is not None and value is None and not self.labels:
            return "the judge gives values, not labels: give value"
        return None


@dataclass
class ImportResult:
    """What an import did."""

    appended: int
    already_present: int
    part: Path | None


def read_label_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(location, row)`` for each row of a JSONL, CSV or Parquet labels file."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise LabelError(f"label import: cannot read {path} ({exc.strerror})") from None
    if not path.is_file():
        raise LabelError(f"label import: {path} is not a file")
    if size > MAX_BYTES:
        raise LabelError(f"label import: {path} is {size >> 20} MiB; a labels file above "
                         f"{MAX_BYTES >> 20} MiB is refused: split it")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except (OSError, pa.ArrowException) as exc:
            raise LabelError(f"label import: {path}: not Parquet ({exc})") from None
        return [(f"{path}:row {i + 1}", r) for i, r in enumerate(rows)]
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise LabelError(f"label import: {path} is not UTF-8 text; save it as UTF-8") from None
    if suffix == ".csv":
        import csv
        import io

        reader = csv.DictReader(io.StringIO(text))
        return [(f"{path}:{reader.line_num}", {k: (v if v != "" else None)
                                               for k, v in row.items()}) for row in reader]
    if suffix not in (".jsonl", ".json", ".ndjson"):
        raise LabelError(f"label import: {path}: give a .jsonl, .csv or .parquet file")
    import json

    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            out.append((f"{path}:{n}", {"__error__": f"not JSON ({exc.msg})"}))
            continue
        out.append((f"{path}:{n}", row if isinstance(row, dict)
                    else {"__error__": "a line must be a JSON object"}))
    return out


def judge_scales(con: Any) -> dict[str, JudgeScale]:
    """Each judge's scale in the runs of ``con`` (a :func:`evalkit.results.query.connect`
    connection): values in [0, 1] when every value is, else the whole numbers around the
    values seen; and the labels seen."""
    scales: dict[str, JudgeScale] = {}
    rows = con.execute("SELECT judge, min(value), max(value), list(DISTINCT label) "
                       "FILTER (WHERE label IS NOT NULL) FROM judgments WHERE status = 'ok' "
                       "GROUP BY judge").fetchall()
    for judge, low, high, labels in rows:
        scale = JudgeScale(labels=set(labels or []))
        if low is not None:
            if low >= 0 and high <= 1:
                scale.low, scale.high = 0.0, 1.0
            else:
                scale.low, scale.high = float(math.floor(low)), float(math.ceil(high))
        scales[judge] = scale
    return scales


def import_labels(path: Path, runs_dir: Path, source: str | None = None,
                  labeler: str | None = None) -> ImportResult:
    """Check every row of ``path`` and append them all, or raise :class:`LabelError` listing
    each refused row (nothing is appended then)."""
    rows = read_label_file(path)
    if not rows:
        raise LabelError(f"label import: {path} holds no labels")
    return import_rows(rows, runs_dir, source or path.name, labeler)


def import_rows(rows: list[tuple[str, dict[str, Any]]], runs_dir: Path, source: str,
                labeler: str | None = None) -> ImportResult:
    """:func:`import_labels` of rows already read (``(location, row)``)."""
    from evalkit.results.query import connect

    con = connect(runs_dir)
    try:
        known = {r for (r,) in con.execute("SELECT DISTINCT record_id FROM records").fetchall()}
        in_run = {(a, b) for a, b in con.execute(
            "SELECT DISTINCT run_id, record_id FROM records").fetchall()}
        scales = judge_scales(con)
    finally:
        con.close()
    if not known:
        raise LabelError(f"label import: no finished run under {runs_dir}: labels name "
                         "records of a run; run one first, or pass --runs-dir")
    samples: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    errors: list[str] = []
    checked: list[dict[str, Any]] = []
    now = datetime.now(timezone.utc)
    for where, row in rows:
        why, clean = _check(row, known, scales, samples, runs_dir, labeler)
        if not why and row.get("run_id") is not None:
            clean["run_id"] = str(row["run_id"])
            if (clean["run_id"], clean["record_id"]) not in in_run:
                why = (f"run {clean['run_id']!r} holds no record {clean['record_id']!r} (or is "
                       "not a finished run); leave run_id empty for a label of the record in "
                       "any run")
        if why:
            errors.append(f"{where}: {why}")
            continue
        clean.setdefault("source", source)
        clean["imported_at"] = now
        clean["_where"] = where
        checked.append(clean)
    with labels_lock(runs_dir):
        stored = read_labels(runs_dir)
        seen: dict[tuple[str, str, str, str | None], tuple[Any, Any, str]] = {
            (r["record_id"], r["judge"], r["labeler"], r["run_id"]):
                (r["value"], r["label"], "stored")
            for r in stored.select(["record_id", "judge", "labeler", "run_id", "value", "label"])
            .to_pylist()}
        fresh, present = [], 0
        for row in checked:
            key = (row["record_id"], row["judge"], row["labeler"], row.get("run_id"))
            if key in seen:
                if seen[key][:2] == (row.get("value"), row.get("label")):
                    present += 1
                    continue
                errors.append(f"{row['_where']}: conflicts with the {seen[key][2]} label of "
                              f"record {key[0]!r} for judge {key[1]!r} by {key[2]!r} "
                              f"(value {seen[key][0]}, label {seen[key][1]}); one labeler "
                              "gives one answer per record and judge")
                continue
            seen[key] = (row.get("value"), row.get("label"), f"line {row['_where']}")
            fresh.append(row)
        if errors:
            shown = errors[:20] + ([f"... and {len(errors) - 20} more"] if len(errors) > 20
                                   else [])
            raise LabelError(f"label import: {len(errors)} row(s) refused, nothing imported:\n"
                             + "\n".join(shown))
        part = None
        if fresh:
            for row in fresh:
                del row["_where"]
            part = append_labels(runs_dir, pa.Table.from_pylist(fresh, schema=LABELS))
    return ImportResult(len(fresh), present, part)


def _check(row: dict[str, Any], known: set[str], scales: dict[str, JudgeScale],
           samples: dict[str, dict[tuple[str, str], dict[str, Any]]], runs_dir: Path,
           labeler: str | None) -> tuple[str | None, dict[str, Any]]:
    if "__error__" in row:
        return row["__error__"], {}
    unknown = sorted(set(row) - set(KEYS))
    if unknown:
        return f"unknown key(s) {unknown}; a label has {', '.join(KEYS)}", {}
    out: dict[str, Any] = {}
    for key in ("record_id", "judge", "labeler"):
        value = row.get(key, labeler if key == "labeler" else None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "record_id":
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            return f"{key} is missing (every label names its record, judge and labeler)", {}
        out[key] = value
    if out["record_id"] not in known:
        return f"record {out['record_id']!r} is in no finished run under {runs_dir}", {}
    if out["judge"] not in scales:
        return (f"judge {out['judge']!r} judged nothing in the runs; judges: "
                f"{', '.join(sorted(scales)) or 'none'}"), {}
    value, label = row.get("value"), row.get("label")
    if value is not None:
        try:
            value = float(value)
        except (TypeError, ValueError):
            return f"value {value!r} is not a number", {}
        if not math.isfinite(value):
            return f"value {value!r} is not a finite number", {}
    if label is not None and not isinstance(label, str):
        label = str(label)
    if value is None and label is None:
        return "give value or label", {}
    why = scales[out["judge"]].refuse(value, label)
    if why:
        return why, {}
    out["value"], out["label"] = value, label
    if row.get("labelled_at") is not None:
        from evalkit._time import iso_time

        try:
            out["labelled_at"] = iso_time(str(row["labelled_at"]))
        except ValueError:
            return f"labelled_at {row['labelled_at']!r} is not ISO-8601", {}
    else:
        out["labelled_at"] = datetime.now(timezone.utc)
    if row.get("source") is not None:
        out["source"] = str(row["source"])
    why = _design(row, out, samples, runs_dir)
    return why, out


def _design(row: dict[str, Any], out: dict[str, Any],
            samples: dict[str, dict[tuple[str, str], dict[str, Any]]], runs_dir: Path
            ) -> str | None:
    """Fill the design, inclusion probability and stratum: from the sample the row names,
    else from the row; a row with neither was not drawn at random (validation only)."""
    sample_id = row.get("sample_id")
    design, prob = row.get("design"), row.get("inclusion_prob")
    if sample_id is not None:
        sample_id = str(sample_id)
        if sample_id not in samples:
            table = read_sample(runs_dir, sample_id)
            samples[sample_id] = {(r["record_id"], r["judge"]): r for r in table.to_pylist()}
        drawn = samples[sample_id].get((out["record_id"], out["judge"]))
        if drawn is None:
            return (f"record {out['record_id']!r} was not drawn in sample {sample_id!r} for "
                    f"judge {out['judge']!r}")
        for key in ("design", "inclusion_prob"):
            if row.get(key) is not None and row[key] != drawn[key] and \
                    str(row[key]) != str(drawn[key]):
                return f"{key} {row[key]!r} differs from sample {sample_id!r}'s {drawn[key]!r}"
        out.update(sample_id=sample_id, design=drawn["design"],
                   inclusion_prob=drawn["inclusion_prob"], stratum=drawn["stratum"])
        return None
    if design is None:
        if prob is not None:
            return "inclusion_prob without design: name the design it came from"
        return None
    if design not in DESIGNS:
        return f"design {design!r} is not one of {', '.join(DESIGNS)} (leave it empty for " \
               "labels not drawn at random)"
    try:
        prob = 1.0 if design == "census" and prob is None else float(prob)
    except (TypeError, ValueError):
        return f"design {design!r} needs inclusion_prob, a number in (0, 1]"
    if not 0 < prob <= 1:
        return f"inclusion_prob {prob!r} is not in (0, 1]"
    out.update(design=design, inclusion_prob=prob,
               stratum=None if row.get("stratum") is None else str(row["stratum"]))
    return None
