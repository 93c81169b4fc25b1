"""Human labels a source already carries (a column such as ``human_label``, a metadata key,
or annotation scores imported as a judge's judgments), declared as labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.errors import LabelError

__all__ = ["column_rows", "score_rows"]


def column_rows(run_dir: Path, column: str, judge: str, labeler: str
                ) -> list[tuple[str, dict[str, Any]]]:
    """One label row per record of ``run_dir`` whose ``column`` (a record column, or
    ``metadata.<key>``) holds a value: a number becomes ``value``, other text ``label``. When
    every included record has one, they are a census (inclusion probability 1); otherwise
    they were not drawn at random and only validate."""
    from evalkit.metrics._stats import SLICEABLE, slice_sql
    from evalkit.results.writer import run_connection

    if column not in SLICEABLE and not column.startswith("metadata."):
        raise LabelError(f"label import --column: {column!r} is not a record column; choose "
                         f"from {', '.join(SLICEABLE)}, or metadata.<key>")
    con = run_connection(run_dir)
    try:
        found = con.execute(f"SELECT record_id, {slice_sql(column)}, excluded_by IS NULL "
                            "FROM records").fetchall()
    finally:
        con.close()
    rows, included_without = [], 0
    for record_id, text, included in found:
        if text is None or str(text).strip() == "":
            included_without += bool(included)
            continue
        row: dict[str, Any] = {"record_id": record_id, "judge": judge, "labeler": labeler}
        try:
            row["value"] = float(text)
        except ValueError:
            row["label"] = str(text)
        rows.append((f"{run_dir.name}:{record_id}", row))
    if not rows:
        raise LabelError(f"label import --column {column}: no record of run {run_dir.name} "
                         "has a value there")
    return _census(rows, included_without)


def score_rows(run_dir: Path, score: str, judge: str, labeler: str
               ) -> list[tuple[str, dict[str, Any]]]:
    """One label row per record of ``run_dir`` that an imported score named ``score`` (a
    Langfuse annotation, a human review exported with the data) gives a value or label; a
    census when every included record has one, as :func:`column_rows`."""
    from evalkit.results.writer import run_connection

    con = run_connection(run_dir)
    try:
        found = con.execute(
            "SELECT r.record_id, j.value, j.label, r.excluded_by IS NULL FROM records r "
            "LEFT JOIN (SELECT * FROM judgments WHERE judge = ? AND origin = 'imported' "
            "AND status = 'ok') j USING (record_id)", [score]).fetchall()
    finally:
        con.close()
    rows, included_without = [], 0
    for record_id, value, label, included in found:
        if value is None and label is None:
            included_without += bool(included)
            continue
        row: dict[str, Any] = {"record_id": record_id, "judge": judge, "labeler": labeler}
        if value is not None:
            row["value"] = value
        else:
            row["label"] = label
        rows.append((f"{run_dir.name}:{record_id}", row))
    if not rows:
        raise LabelError(f"label import --score {score}: run {run_dir.name} imported no score "
                         f"named {score!r} (imported scores are judgments with origin "
                         "'imported')")
    return _census(rows, included_without)


def _census(rows: list[tuple[str, dict[str, Any]]], included_without: int
            ) -> list[tuple[str, dict[str, Any]]]:
    """Labels on every included record are a census (inclusion probability 1); otherwise
    they were not drawn at random and only validate."""
    if not included_without:
        for _, row in rows:
            row.update(design="census", inclusion_prob=1.0)
    return rows
