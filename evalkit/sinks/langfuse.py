"""``langfuse`` sink: a run's judgments back into Langfuse as scores.

One ``POST /api/public/scores`` per judgment, attached to the record's observation (or trace),
named after the judge, with the explanation as comment and the run in metadata.

Score ids are deterministic: ``uuid5(run id, record id, judge)``. Langfuse treats a POST with
an existing id as an update, so pushing the same run twice (or a push at the end of a run
followed by ``evalkit push``) updates the scores instead of duplicating them, while two runs
(a rerun, or the jobs of a sweep over judge models) keep separate scores whose metadata names
the run. ``id_scope: experiment`` keys ids on the experiment instead of the run, so the latest
run of an experiment overwrites the previous one's scores.

Judgments that were not scored (``skipped`` because a filter set the record aside, or
``error``) are not pushed unless asked; scores imported from Langfuse are never pushed back.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import EvalkitError
from evalkit.langfuse_client import (
    AuthError,
    LangfuseClient,
    NotFound,
    TooHeavy,
    refuse_keys_in_config,
    resolve_host,
)
from evalkit.plugin import Sink

__all__ = ["ID_SCOPES", "LangfuseSink", "LangfuseSinkConfig", "score_id"]

ID_SCOPES = ("run", "experiment")
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/evalkit/evalkit#langfuse-score")
_TEXT_LIMIT = 500  # Langfuse's limit for TEXT score values
_FAILURES_KEPT = 50


@dataclass(frozen=True)
class LangfuseSinkConfig:
    host: str | None = None  # Langfuse URL; default the host the run read from, else env
    judges: list[str] = field(default_factory=list)  # push only these judges; []: all
    include_skipped: bool = False  # also push skipped judgments (as TEXT scores, with reason)
    include_errors: bool = False  # also push judge errors (as TEXT scores, with the error)
    id_scope: str = "run"  # run: each run keeps its scores; experiment: latest run overwrites
    environment: str | None = None  # Langfuse environment of the scores; default the server's
    concurrency: int = 8  # requests in flight
    timeout_s: float = 60.0  # per request
    max_retries: int = 6  # per request, on 429, 5xx, 524 and network errors
    public_key: str | None = None  # never set: keys come from $LANGFUSE_PUBLIC_KEY
    secret_key: str | None = None  # never set: keys come from $LANGFUSE_SECRET_KEY

    def validate(self) -> None:
        refuse_keys_in_config(self.public_key, self.secret_key)
        if self.id_scope not in ID_SCOPES:
            raise ValueError(f"id_scope: {self.id_scope!r} is not one of {', '.join(ID_SCOPES)}")
        if self.concurrency < 1:
            raise ValueError("concurrency: must be at least 1")


def score_id(scope: str, record_id: str, judge: str) -> str:
    """The deterministic Langfuse score id of one judgment."""
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join((scope, record_id, judge))))


def _read_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest and every judgment joined with its record's Langfuse ids."""
    import duckdb

    from evalkit.results.writer import run_connection

    manifest_path = run_dir / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        raise EvalkitError(f"push: cannot read {manifest_path} ({exc}); pass a run id or a "
                           "run directory") from None
    con = run_connection(run_dir)
    try:
        rel = con.sql(
            "SELECT j.record_id, j.judge, j.plugin, j.judge_model, j.value, j.label, "
            "j.passed, j.explanation, j.status, j.error, j.origin, r.trace_id, "
            "r.observation_id, r.session_id, r.excluded_by, r.exclude_reason "
            "FROM judgments j LEFT JOIN records r USING (record_id) "
            "ORDER BY j.judge, j.record_id")
        rows = rel.to_arrow_table().to_pylist()
    except duckdb.Error as exc:
        raise EvalkitError(f"push: cannot read the run in {run_dir}: {exc}") from None
    finally:
        con.close()
    return manifest, rows


def _source_host(manifest: dict[str, Any]) -> str | None:
    for fp in (manifest.get("sources") or {}).values():
        if isinstance(fp, dict) and fp.get("plugin") == "langfuse" and fp.get("host"):
            return str(fp["host"])
    return None


class LangfuseSink(Sink):
    """Pushes a finished run's judgments to Langfuse as scores."""

    Config = LangfuseSinkConfig

    def __init__(self, name: str, config: LangfuseSinkConfig, ctx: object = None) -> None:
        self.name = name
        self.config = config

    def scores(self, manifest: dict[str, Any], rows: list[dict[str, Any]]
               ) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], dict[str, int],
                          list[dict[str, str]]]:
        """(judgment, score body) pairs to send, counts of what is not sent and why, and the
        judgments that cannot become scores."""
        cfg = self.config
        run_id, experiment = str(manifest.get("run_id")), str(manifest.get("experiment"))
        scope = run_id if cfg.id_scope == "run" else f"experiment:{experiment}"
        send: list[tuple[dict[str, Any], dict[str, Any]]] = []
        skipped: dict[str, int] = {}
        failed: list[dict[str, str]] = []

        def skip(why: str) -> None:
            skipped[why] = skipped.get(why, 0) + 1

        for row in rows:
            if cfg.judges and row["judge"] not in cfg.judges:
                skip("judge not selected")
                continue
            if row["origin"] == "imported":
                skip("imported from the source")
                continue
            status = row["status"]
            if status == "skipped" and not cfg.include_skipped:
                skip("skipped (record set aside by a filter)")
                continue
            if status == "error" and not cfg.include_errors:
                skip("judge error")
                continue
            body = self._body(row, scope, run_id, experiment)
            if isinstance(body, str):
                failed.append({"record_id": row["record_id"], "judge": row["judge"],
                               "reason": body})
            else:
                send.append((row, body))
        return send, skipped, failed

    def _body(self, row: dict[str, Any], scope: str, run_id: str, experiment: str
              ) -> dict[str, Any] | str:
        """The score for one judgment, or why there cannot be one."""
        trace_id, session_id = row["trace_id"], row["session_id"]
        if not trace_id and not session_id:
            return "the record has no Langfuse trace or session id (not read from Langfuse)"
        body: dict[str, Any] = {"id": score_id(scope, row["record_id"], row["judge"]),
                                "name": row["judge"]}
        if trace_id:
            body["traceId"] = trace_id
            if row["observation_id"] and row["record_id"] != trace_id:
                body["observationId"] = row["observation_id"]
        else:
            body["sessionId"] = session_id
        if row["status"] != "ok":
            reason = row["error"] or row["explanation"] or ""
            body.update(dataType="TEXT",
                        value=f"{row['status']}: {reason}".strip(": ")[:_TEXT_LIMIT])
        elif row["value"] is not None:
            body.update(dataType="NUMERIC", value=row["value"])
        elif row["passed"] is not None:
            body.update(dataType="BOOLEAN", value=1 if row["passed"] else 0)
        elif row["label"]:
            body.update(dataType="CATEGORICAL", value=row["label"])
        else:
            return "the judgment has no value, verdict or label"
        if row["explanation"]:
            body["comment"] = row["explanation"]
        meta = {"evalkit_run_id": run_id, "experiment": experiment, "record_id": row["record_id"],
                "judge_model": row["judge_model"], "plugin": row["plugin"],
                "status": row["status"], "label": row["label"], "passed": row["passed"]}
        if row["excluded_by"]:
            meta["failed_pipeline"] = f"{row['excluded_by']}: {row['exclude_reason'] or ''}"
        body["metadata"] = {k: v for k, v in meta.items() if v is not None}
        if self.config.environment:
            body["environment"] = self.config.environment
        return body

    def push(self, run_dir: Path) -> dict[str, Any]:
        """Send the run's judgments; return what was pushed, skipped and failed."""
        manifest, rows = _read_run(Path(run_dir))
        host = resolve_host(self.config.host or _source_host(manifest))
        send, skipped, failed = self.scores(manifest, rows)
        pushed, post_failures = asyncio.run(self._send(host, send))
        failed.extend(post_failures)
        return {"host": host, "run_id": manifest.get("run_id"), "id_scope": self.config.id_scope,
                "pushed": pushed, "skipped": skipped, "failed": len(failed),
                "failures": failed[:_FAILURES_KEPT]}

    async def _send(self, host: str, send: list[tuple[dict[str, Any], dict[str, Any]]]
                    ) -> tuple[int, list[dict[str, str]]]:
        cfg = self.config
        failures: list[dict[str, str]] = []
        pushed = 0
        async with LangfuseClient(host, cfg.concurrency, cfg.timeout_s,
                                  cfg.max_retries) as client:
            async def one(row: dict[str, Any], body: dict[str, Any]) -> None:
                nonlocal pushed
                try:
                    await client.post("/api/public/scores", body)
                except AuthError:
                    raise  # every other score would fail the same way
                except (EvalkitError, NotFound, TooHeavy, ValueError) as exc:
                    failures.append({"record_id": row["record_id"], "judge": row["judge"],
                                     "reason": f"{type(exc).__name__}: {exc}"})
                else:
                    pushed += 1

            await asyncio.gather(*(one(r, b) for r, b in send))
        return pushed, failures
