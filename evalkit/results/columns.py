"""The columns of every run table, as plain data: the one definition that the Arrow schemas
(:mod:`evalkit.results.schemas`) and the DuckDB views (:mod:`evalkit.results.query`) are both
built from. Importing it costs nothing, so `evalkit query` starts without pyarrow."""

from __future__ import annotations

__all__ = ["COLUMNS", "empty_select_sql", "sql_literal"]

COLUMNS: dict[str, list[tuple[str, str]]] = {
    "records": [
        ("run_id", "string"),
        ("record_id", "string"),
        ("source", "string"),
        ("trace_id", "string"),
        ("observation_id", "string"),
        ("session_id", "string"),
        ("timestamp", "timestamp"),
        ("model", "string"),
        ("level", "string"),
        ("status_message", "string"),
        ("input", "string"),
        ("output", "string"),
        ("context", "list<string>"),
        ("reference", "string"),
        ("latency_s", "float64"),
        ("cost_usd", "float64"),
        ("input_tokens", "int64"),
        ("output_tokens", "int64"),
        ("confidence", "float64"),
        ("outcome", "string"),
        ("user_action", "string"),
        ("final_output", "string"),
        ("human_label", "string"),
        ("tags", "list<string>"),
        ("metadata", "string"),
        ("excluded_by", "string"),
        ("exclude_reason", "string"),
        # shadow evaluation (generate:): 'recorded' or 'candidate'; null in other runs
        ("side", "string"),
    ],
    "judgments": [
        ("run_id", "string"),
        ("record_id", "string"),
        ("judge", "string"),
        ("plugin", "string"),
        ("judge_model", "string"),
        ("value", "float64"),
        ("label", "string"),
        ("passed", "bool"),
        ("explanation", "string"),
        ("raw", "string"),
        ("exchange", "string"),
        ("status", "string"),
        ("error", "string"),
        ("error_cause", "string"),
        ("origin", "string"),
        ("attempts", "int32"),
        ("latency_s", "float64"),
        ("input_tokens", "int64"),
        ("output_tokens", "int64"),
        ("cost_usd", "float64"),
        ("details", "string"),
        ("repeat", "int32"),
        ("produced_by", "string"),
    ],
    "metrics": [
        ("run_id", "string"),
        ("metric", "string"),
        ("plugin", "string"),
        ("slice", "string"),
        ("value", "float64"),
        ("ci_low", "float64"),
        ("ci_high", "float64"),
        ("n_attempted", "int64"),
        ("n_excluded", "int64"),
        ("n_judged", "int64"),
        ("n_unscored", "int64"),
        ("higher_is_better", "bool"),
        ("details", "string"),
    ],
    "alerts": [
        ("run_id", "string"),
        ("metric", "string"),
        ("slice", "string"),
        ("value", "float64"),
        ("operator", "string"),
        ("threshold", "float64"),
        ("severity", "string"),
        ("message", "string"),
        ("hints", "list<string>"),
    ],
    "rejects": [
        ("run_id", "string"),
        ("source", "string"),
        ("location", "string"),
        ("reason", "string"),
        ("raw", "string"),
    ],
    # the extra judgments of runner.repeats (repeat 1 .. k-1; repeat 0 is in judgments)
    "repeats": [],
    # human labels, kept for the whole runs directory (runs/_labels/): they follow records
    # across runs by record_id (evalkit.labels)
    "labels": [
        ("record_id", "string"),
        ("judge", "string"),  # the judge whose question the label answers
        ("value", "float64"),
        ("label", "string"),
        ("labeler", "string"),
        ("labelled_at", "timestamp"),
        ("source", "string"),  # the file imported, review, or column:<name> of a run
        ("sample_id", "string"),  # the drawn sample the record came from, if any
        ("design", "string"),  # census, random, stratified, active; null: not drawn at random
        ("inclusion_prob", "float64"),  # the record's chance of being drawn; null: unknown
        ("stratum", "string"),  # its stratum in a stratified draw
        ("run_id", "string"),  # the run whose output was labelled; null: the record's in any run
        ("imported_at", "timestamp"),
    ],
}

COLUMNS["repeats"] = COLUMNS["judgments"]

_DUCKDB = {
    "string": "VARCHAR",
    "float64": "DOUBLE",
    "int64": "BIGINT",
    "int32": "INTEGER",
    "bool": "BOOLEAN",
    "timestamp": "TIMESTAMPTZ",
    "list<string>": "VARCHAR[]",
}


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def empty_select_sql(table: str) -> str:
    """A ``SELECT`` with ``table``'s columns and no rows, in plain SQL."""
    cols = ", ".join(f'CAST(NULL AS {_DUCKDB[t]}) AS "{name}"' for name, t in COLUMNS[table])
    return f"SELECT {cols} WHERE false"
