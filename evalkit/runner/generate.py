"""The generate stage of a run (``generate:`` in the config): after the filters, each batch's
records to replay go to the generator, and each candidate output becomes a record beside
the recorded one, filtered by the run's filters and judged like any record.

A candidate record is its recorded record with ``record_id`` + ``::candidate``,
``side='candidate'``, the candidate's ``output``, ``model``, ``latency_s``, ``cost_usd`` and
tokens, and none of what belonged to the recorded answer (level, status, outcome, user
action, final output, human label); the generator's details go into its metadata under
``generate``. A candidate that failed (no output) is set aside with ``excluded_by =
'generate'`` and the reason. The recorded records get ``side='recorded'``.

Replayed: the records no filter set aside, and with ``replay_failed: true`` also those the
``pipeline_failure`` filter did (the metric ``failure_recovery`` counts how many the
candidate answered). ``judge_sides: candidate`` sets the recorded records aside
(``excluded_by='generate'``) so that only the candidates are judged. A dry run makes no call:
it prices the calls (:meth:`Generating.estimates`) and judges no candidate. A turn of an
agent session is replayed with the turns before it (:mod:`evalkit.runner.conversations`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.analysis.metadata import metadata_object
from evalkit.config import PluginInstance
from evalkit.errors import EvalkitError
from evalkit.redact import mask
from evalkit.results.schemas import RECORDS, conform
from evalkit.runner.conversations import Conversations

__all__ = ["CANDIDATE_SUFFIX", "Generating"]

CANDIDATE_SUFFIX = "::candidate"
STAGE = "generate"  # the excluded_by of a failed candidate (or of a recorded side not judged)
# what belonged to the recorded answer, not to the candidate's
_RECORDED_ONLY = ("level", "status_message", "outcome", "user_action", "final_output",
                  "human_label", "confidence", "excluded_by", "exclude_reason")
_TAKEN = ("output", "model", "latency_s", "cost_usd", "input_tokens", "output_tokens")

Filters = Callable[[pa.Table], pa.Table]


def _column(table: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


class Generating:
    """The generate stage of one run: ``inst`` and its ``plugin``; ``filters`` marks a
    table of candidate records as the run's filters do."""

    def __init__(self, inst: PluginInstance, plugin: Any, filters: Filters,
                 dry_run: bool) -> None:
        self.inst = inst
        self.plugin = plugin
        self.filters = filters
        self.dry_run = dry_run
        config = inst.config
        self.replay_failed = bool(getattr(config, "replay_failed", False))
        self.judge_sides = getattr(config, "judge_sides", "both")
        self.counts = {"replayed": 0, "generated": 0, "failed": 0}
        self.spend = {"cost_usd": 0.0, "unpriced": 0, "input_tokens": 0, "output_tokens": 0}
        self.estimate = {"calls": 0, "cached_calls": 0, "input_tokens": 0,
                         "output_tokens": 0, "cost_usd": 0.0}
        self.seconds = 0.0
        self.conversations = Conversations()  # a turn replayed with the turns before it

    def extend(self, table: pa.Table) -> pa.Table:
        """``table`` (filtered records) as recorded records, followed by the candidates."""
        t0 = time.perf_counter()
        excluded = table.column("excluded_by")
        replay = pc.is_null(excluded)
        if self.replay_failed:
            replay = pc.or_(replay, pc.fill_null(pc.equal(excluded, "pipeline_failure"),
                                                 False))
        chosen = table.filter(replay)
        sent, history = self.conversations.replayed(table, chosen)
        recorded = _column(table, "side", pa.array(["recorded"] * table.num_rows, pa.string()))
        if self.judge_sides == "candidate":
            keep = pc.is_null(excluded)
            recorded = _column(recorded, "excluded_by", pc.if_else(keep, STAGE, excluded))
            recorded = _column(recorded, "exclude_reason", pc.if_else(
                keep, "recorded side: only the candidate is judged (generate.judge_sides)",
                recorded.column("exclude_reason")))
        if self.dry_run:
            for key, value in self.plugin.estimate(sent).items():
                if key in self.estimate and isinstance(value, (int, float)):
                    self.estimate[key] += value
            self.seconds += time.perf_counter() - t0
            return recorded
        rows = asyncio.run(self.plugin.agenerate(sent)) if chosen.num_rows else []
        candidates = self._candidates(chosen, rows, history)
        self.seconds += time.perf_counter() - t0
        return pa.concat_tables([recorded, self.filters(candidates)])

    def _candidates(self, chosen: pa.Table, rows: list[dict[str, Any]],
                    history: dict[str, dict[str, int]]) -> pa.Table:
        ids = chosen.column("record_id").to_pylist()
        by_id = {r.get("record_id"): r for r in rows if isinstance(r, dict)}
        if len(rows) != len(ids) or set(by_id) != set(ids):
            raise EvalkitError(f"generate: plugin '{self.inst.plugin}' returned {len(rows)} "
                               f"candidates for {len(ids)} records; it must return one per "
                               "record, with its record_id")
        out = []
        for record in chosen.to_pylist():
            made = by_id[record["record_id"]]
            row = {k: (None if k in _RECORDED_ONLY else v) for k, v in record.items()}
            row.update({k: made.get(k) for k in _TAKEN})
            row["record_id"] = f"{record['record_id']}{CANDIDATE_SUFFIX}"
            row["side"] = "candidate"
            row["output"] = made.get("output") if isinstance(made.get("output"), str) else None
            recorded = record.get("metadata")
            meta = metadata_object(recorded)
            if meta is None:  # kept whole beside the candidate's entry
                meta = {"metadata": _json_or_text(recorded)}
            meta["generate"] = {"generator": self.inst.name, "recorded_id": record["record_id"],
                                **history.get(record["record_id"], {}),
                                **(made.get("details") or {})}
            row["metadata"] = orjson.dumps(meta, default=str).decode()
            error = made.get("error")
            if error is not None or row["output"] is None:
                row["excluded_by"] = STAGE
                row["exclude_reason"] = mask(f"the candidate gave no output: "
                                             f"{error or 'none returned'}")
                self.counts["failed"] += 1
            else:
                self.counts["generated"] += 1
            self.counts["replayed"] += 1
            cost = made.get("cost_usd")
            if isinstance(cost, (int, float)):
                self.spend["cost_usd"] += cost
            else:
                self.spend["unpriced"] += 1
            for key in ("input_tokens", "output_tokens"):
                if isinstance(made.get(key), int):
                    self.spend[key] += made[key]
            out.append(row)
        return conform(out, RECORDS) if out else RECORDS.empty_table()

    def manifest(self) -> dict[str, Any]:
        """What the stage did, for the manifest (a dry run: what it would have spent)."""
        if self.dry_run:
            return {"generator": self.inst.name, "plugin": self.inst.plugin,
                    "dry_run_estimate": self.estimate}
        return {"generator": self.inst.name, "plugin": self.inst.plugin, **self.counts,
                **self.spend, "seconds": round(self.seconds, 4)}

    def close(self) -> None:
        self.plugin.close()


def _json_or_text(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
