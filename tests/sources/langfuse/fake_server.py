"""A fake Langfuse server for tests and benchmarks, on 127.0.0.1.

It implements both API generations the way the real servers behave (see
/work/shared/langfuse/NOTES.md): ``v3`` serves page-based ``/traces``, ``/observations``,
``/observations/{id}`` and ``/v2/scores`` and answers 404 on ``/v2/observations`` unless opted
in; ``v4`` serves cursor-based ``/v2/observations`` (field groups, ``filter`` on ``id``) and
answers 404 on the old reads; both serve ``/v3/scores``, ``POST /scores`` (upsert by ``id``)
and ``/health``. Faults can be injected: 429 with ``Retry-After``, 5xx/524, 422 above a page
size, objects hidden from bulk lists, and ingestion lag.

Every JSON body it sends (and every score it receives) is validated against the Langfuse
OpenAPI spec subset in ``data/openapi-subset.yml``; a violation is answered with a 500 and
kept in ``violations``, so a test using the fake fails when the fake drifts from the spec.

Run it alone (for benchmarks): ``python tests/sources/langfuse/fake_server.py --generation v4
--observations 50000 --latency 0.1``; it prints ``PORT <n>`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import functools
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from aiohttp import web

SPEC_PATH = Path(__file__).parent / "data" / "openapi-subset.yml"
PUBLIC_KEY = "pk-lf-test"
SECRET_KEY = "sk-lf-test-secret"
P = "/api/public"


def iso(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse(value: str) -> datetime:
    ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


class SpecValidator:
    """Validates bodies against component schemas of the copied OpenAPI 3.0 spec."""

    _validators: dict[str, Any] = {}  # shared: building one costs more than a test

    def __init__(self, path: Path = SPEC_PATH) -> None:
        self.path = path

    def errors(self, schema: str, body: Any) -> list[str]:
        validator = self._validators.get(schema)
        if validator is None:
            validator = self._validators[schema] = _validator(self.path, schema)
        return [f"{schema}: {'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
                for e in validator.iter_errors(body)]


@functools.cache
def _spec(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text())


def _validator(path: Path, schema: str) -> Any:
    from openapi_schema_validator import OAS30Validator, oas30_format_checker

    return OAS30Validator({"$ref": f"#/components/schemas/{schema}",
                           "components": _spec(path)["components"]},
                          format_checker=oas30_format_checker)


@dataclass
class Fault:
    """Answer ``times`` requests whose path starts with ``path`` with ``status``, after
    letting the first ``after`` of them through."""

    path: str
    status: int
    times: int = 1
    retry_after: str | None = None
    body: Any = None
    after: int = 0
    raw: bytes | None = None  # a body sent as it is (not JSON), e.g. a proxy's login page


_V2_GROUPS = {
    "basic": ("name", "level", "statusMessage", "version", "environment", "bookmarked",
              "public", "userId", "sessionId", "isRootObservation"),
    "time": ("completionStartTime", "createdAt", "updatedAt"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": ("providedModelName", "internalModelId", "modelParameters"),
    "usage": ("usageDetails", "costDetails", "totalCost", "usagePricingTierName"),
    "prompt": ("promptId", "promptName", "promptVersion"),
    "metrics": ("latency", "timeToFirstToken"),
    "trace_context": ("traceName", "tags", "release"),
}
_V2_CORE = ("id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type",
            "modelId", "inputPrice", "outputPrice", "totalPrice")


class FakeLangfuse:
    """The server's data and behaviour. ``generation`` is ``v3`` or ``v4``."""

    def __init__(self, generation: str = "v4", latency_s: float = 0.0, v2_opt_in: bool = False,
                 validate: bool = True) -> None:
        assert generation in ("v3", "v4")
        self.generation = generation
        self.latency_s = latency_s
        self.v2_opt_in = v2_opt_in
        self.validator = SpecValidator() if validate else None
        self.project_id = "proj-test"
        self.traces: dict[str, dict[str, Any]] = {}
        self.observations: dict[str, dict[str, Any]] = {}
        self.scores: dict[str, dict[str, Any]] = {}
        self.visible_at: dict[str, float] = {}  # object id -> monotonic time it shows up
        self.hidden_from_list: set[str] = set()
        self.faults: list[Fault] = []
        self.heavy_limit: int | None = None  # 422 when a list asks for more per page
        self.score_lag_s = 0.0
        self.received: list[dict[str, Any]] = []  # accepted POST /scores bodies
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        # objects sent, by endpoint ("... by id" for look-ups by id): the load a read puts on
        # the server, e.g. that time-window shards fetch each observation once between them
        self.served: dict[str, int] = {}
        self.violations: list[str] = []
        self.info: dict[str, Any] = {}  # what make_dataset built, for the tests to check
        self._sorted: list[tuple[float, str]] = []
        self._by_type: dict[Any, list[tuple[float, str]]] = {}  # the index, per type
        self._dirty = True
        self._cache: dict[str, list[dict[str, Any]]] = {}
        self._matches: dict[str, list[tuple[float, str]]] = {}
        self._rendered: dict[tuple, dict[str, bytes]] = {}  # shape -> object id -> JSON
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- data ---------------------------------------------------------------------------------

    def add_trace(self, trace: dict[str, Any]) -> None:
        self.traces[trace["id"]] = trace
        self._dirty = True

    def add_observation(self, obs: dict[str, Any], lag_s: float = 0.0) -> None:
        self.observations[obs["id"]] = obs
        if lag_s:
            self.visible_at[obs["id"]] = time.monotonic() + lag_s
        self._dirty = True

    def add_score(self, score: dict[str, Any]) -> None:
        self.scores[score["id"]] = score

    def _visible(self, obj_id: str) -> bool:
        at = self.visible_at.get(obj_id)
        return at is None or time.monotonic() >= at

    def _index(self) -> list[tuple[float, str]]:
        if self._dirty:
            self._sorted = sorted((parse(o["startTime"]).timestamp(), o["id"])
                                  for o in self.observations.values())
            self._by_type = {}
            for entry in self._sorted:
                self._by_type.setdefault(self.observations[entry[1]].get("type"),
                                         []).append(entry)
            self._cache.clear()
            self._matches.clear()
            self._dirty = False
        return self._sorted

    # -- rendering ----------------------------------------------------------------------------

    def _trace_of(self, obs: dict[str, Any]) -> dict[str, Any]:
        return self.traces.get(obs.get("traceId") or "", {})

    def render_v1(self, obs: dict[str, Any]) -> dict[str, Any]:
        start, end = parse(obs["startTime"]), obs.get("endTime")
        usage = obs.get("usageDetails") or {}
        cost = obs.get("costDetails") or {}
        out = {k: obs.get(k) for k in (
            "id", "traceId", "type", "name", "startTime", "endTime", "completionStartTime",
            "model", "modelParameters", "input", "version", "metadata", "output", "level",
            "statusMessage", "parentObservationId", "promptId", "promptName", "promptVersion",
            "environment")}
        out.update(
            usage={"input": usage.get("input", 0), "output": usage.get("output", 0),
                   "total": usage.get("total", 0), "unit": "TOKENS" if usage else None,
                   "inputCost": cost.get("input"), "outputCost": cost.get("output"),
                   "totalCost": cost.get("total")},
            usageDetails=usage, costDetails=cost, modelId=None, inputPrice=None,
            outputPrice=None, totalPrice=None, calculatedInputCost=cost.get("input"),
            calculatedOutputCost=cost.get("output"), calculatedTotalCost=cost.get("total"),
            latency=(parse(end) - start).total_seconds() if end else None,
            timeToFirstToken=None)
        out["level"] = out["level"] or "DEFAULT"
        out["environment"] = out["environment"] or "default"
        return out

    def render_v2(self, obs: dict[str, Any], groups: set[str],
                  expand: set[str]) -> dict[str, Any]:
        trace = self._trace_of(obs)
        v1 = self.render_v1(obs)
        full = {
            **v1, "projectId": self.project_id, "bookmarked": False, "public": False,
            "userId": trace.get("userId"), "sessionId": trace.get("sessionId"),
            "isRootObservation": obs.get("parentObservationId") is None,
            "createdAt": obs["startTime"], "updatedAt": obs["startTime"],
            "input": _raw(obs.get("input")), "output": _raw(obs.get("output")),
            "providedModelName": obs.get("model"), "internalModelId": None,
            "totalCost": (obs.get("costDetails") or {}).get("total"),
            "usagePricingTierName": None,
            "traceName": trace.get("name"), "tags": trace.get("tags", []),
            "release": trace.get("release"),
        }
        meta = obs.get("metadata")
        if isinstance(meta, dict):
            full["metadata"] = {k: (v[:200] if isinstance(v, str) and k not in expand else v)
                                for k, v in meta.items()}
        out = {k: full.get(k) for k in _V2_CORE}
        for group in groups:
            for key in _V2_GROUPS.get(group, ()):
                out[key] = full.get(key)
        return out

    def render_trace(self, trace: dict[str, Any], groups: set[str]) -> dict[str, Any]:
        obs = [o for o in self.observations.values() if o.get("traceId") == trace["id"]]
        out = {k: trace.get(k) for k in ("id", "timestamp", "name", "sessionId", "release",
                                         "version", "userId", "tags", "public", "environment",
                                         "metadata")}
        out["htmlPath"] = f"/project/{self.project_id}/traces/{trace['id']}"
        if "io" in groups:
            out.update(input=trace.get("input"), output=trace.get("output"))
        if "metrics" in groups:
            costs = [(o.get("costDetails") or {}).get("total") for o in obs]
            out["totalCost"] = sum(c for c in costs if c is not None) if obs else None
            ends = [parse(o["endTime"]) for o in obs if o.get("endTime")]
            out["latency"] = (max(ends) - parse(trace["timestamp"])).total_seconds() \
                if ends else None
        return out

    def render_score_v2(self, sc: dict[str, Any]) -> dict[str, Any]:
        out = {k: sc.get(k) for k in (
            "id", "traceId", "sessionId", "observationId", "datasetRunId", "name", "source",
            "timestamp", "createdAt", "updatedAt", "authorUserId", "comment", "metadata",
            "configId", "queueId", "environment", "dataType")}
        if sc["dataType"] in ("NUMERIC", "BOOLEAN", "CATEGORICAL"):
            out["value"] = sc.get("value") if sc.get("value") is not None else 0
        if sc["dataType"] != "NUMERIC":
            out["stringValue"] = sc.get("stringValue")
        return out

    def render_score_v3(self, sc: dict[str, Any], groups: set[str]) -> dict[str, Any]:
        out: dict[str, Any] = {k: sc.get(k) for k in ("id", "name", "source", "timestamp",
                                                       "environment", "createdAt",
                                                       "updatedAt", "dataType")}
        out["projectId"] = self.project_id
        dt = sc["dataType"]
        out["value"] = (sc["value"] == 1 if dt == "BOOLEAN" else sc["stringValue"]
                        if dt in ("CATEGORICAL", "TEXT", "CORRECTION") else sc["value"])
        if "details" in groups:
            out.update(comment=sc.get("comment"), configId=sc.get("configId"),
                       metadata=sc.get("metadata"))
        if "subject" in groups:
            if sc.get("observationId"):
                out["subject"] = {"kind": "observation", "id": sc["observationId"],
                                  "traceId": sc.get("traceId")}
            elif sc.get("traceId"):
                out["subject"] = {"kind": "trace", "id": sc["traceId"]}
            else:
                out["subject"] = {"kind": "session", "id": sc.get("sessionId")}
        if "annotation" in groups:
            out.update(authorUserId=sc.get("authorUserId"), queueId=sc.get("queueId"))
        return out

    # -- queries ------------------------------------------------------------------------------

    def _matcher(self, q: dict[str, Any], conds: list | None, v2: bool, by_type: bool = False
                 ) -> Callable[[dict[str, Any]], bool] | None:
        """Whether an observation passes ``q``'s filters, testing only the filters ``q`` sets
        (``by_type``: not its type, which its index already selects); ``None``: no test.
        A listing's first page tests thousands of observations."""
        if conds is not None:
            return lambda obs: all(_cond(c, obs, self._trace_of(obs)) for c in conds)
        tests: list[Callable[[dict[str, Any]], bool]] = []
        if q.get("type") and not by_type:
            tests.append(lambda obs: obs.get("type") == q["type"])
        if q.get("name"):
            tests.append(lambda obs: obs.get("name") == q["name"])
        if q.get("level"):
            tests.append(lambda obs: (obs.get("level") or "DEFAULT") == q["level"])
        if q.get("traceId"):
            tests.append(lambda obs: obs.get("traceId") == q["traceId"])
        if q.get("userId"):
            tests.append(lambda obs: self._trace_of(obs).get("userId") == q["userId"])
        if v2 and q.get("sessionId"):
            tests.append(lambda obs: self._trace_of(obs).get("sessionId") == q["sessionId"])
        if q.get("environment"):
            tests.append(lambda obs: (obs.get("environment") or "default") in q["environment"])
        if v2 and q.get("isRootObservation") == "true":
            tests.append(lambda obs: not obs.get("parentObservationId"))

        def matches(obs: dict[str, Any]) -> bool:
            for test in tests:
                if not test(obs):
                    return False
            return True

        return matches if tests else None

    def list_observations(self, q: dict[str, Any], v2: bool, after: tuple | None = None,
                          limit: int | None = None) -> list[dict[str, Any]]:
        """Matching observations, newest first (``startTime`` desc, ``id`` desc)."""
        conds = json.loads(q["filter"]) if q.get("filter") else None
        matching = self._matching(q, conds, v2)
        hi = len(matching) if after is None else bisect.bisect_left(matching, after)
        by_id = bool(conds) and any(c.get("column") == "id" for c in conds)
        out = []
        for i in range(hi - 1, -1, -1):
            obs = self.observations[matching[i][1]]
            if not self._visible(obs["id"]):
                continue
            if obs["id"] in self.hidden_from_list and not by_id:
                continue
            out.append(obs)
            if limit is not None and len(out) >= limit:
                break
        return out

    def _matching(self, q: dict[str, Any], conds: list | None, v2: bool
                  ) -> list[tuple[float, str]]:
        """The index entries (ascending) of the observations ``q`` selects, worked out once
        per query as a database's index would make it cheap: a cursor page then costs a
        bisection, so a benchmark measures the reader, not this fake. What changes over time
        (lag, objects hidden from lists) is checked when a page is served."""
        index = self._index()
        key = json.dumps({"v2": v2, **{k: v for k, v in q.items()
                                       if k not in ("page", "limit", "cursor")}},
                         sort_keys=True)
        matching = self._matches.get(key)
        if matching is None:
            # a type's own index, as a database's index on (type, startTime) would serve it:
            # the first page of a listing by type and time costs a bisection, like the others
            by_type = conds is None and bool(q.get("type"))
            if by_type:
                index = self._by_type.get(q["type"], [])
            lo, hi = 0, len(index)
            if conds is None:
                if q.get("fromStartTime"):
                    lo = bisect.bisect_left(index, (parse(q["fromStartTime"]).timestamp(), ""))
                if q.get("toStartTime"):
                    hi = bisect.bisect_left(index, (parse(q["toStartTime"]).timestamp(), ""))
            matches = self._matcher(q, conds, v2, by_type)
            matching = self._matches[key] = index[lo:hi] if matches is None else [
                entry for entry in index[lo:hi] if matches(self.observations[entry[1]])]
        return matching

    def list_scores(self, q: dict[str, Any]) -> list[dict[str, Any]]:
        names = set(q["name"].split(",")) if q.get("name") else None
        start = parse(q["fromTimestamp"]) if q.get("fromTimestamp") else None
        end = parse(q["toTimestamp"]) if q.get("toTimestamp") else None
        out = []
        for sc in self.scores.values():
            ts = parse(sc["timestamp"])
            if not self._visible(sc["id"]) or (names and sc["name"] not in names) or \
                    (start and ts < start) or (end and ts >= end):
                continue
            out.append(sc)
        out.sort(key=lambda s: (s["timestamp"], s["id"]), reverse=True)
        return out

    # -- HTTP ---------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        r = app.router
        r.add_get(f"{P}/health", self._health)
        r.add_get(f"{P}/traces", self._traces)
        r.add_get(f"{P}/observations", self._observations_v1)
        r.add_get(P + "/observations/{id}", self._observation_v1)
        r.add_get(f"{P}/v2/observations", self._observations_v2)
        r.add_get(f"{P}/v2/scores", self._scores_v2)
        r.add_get(f"{P}/v3/scores", self._scores_v3)
        r.add_post(f"{P}/scores", self._post_score)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Each answer leaves ``latency_s`` after its request arrived: the fake's own work
        (finding and rendering the page) is done within that time, as a real server's is, so
        one request's handling does not add to another's latency."""
        loop = asyncio.get_running_loop()
        due = loop.time() + self.latency_s
        self.requests.append((request.method, request.path, _query(request)))
        response = await self._answer(request, handler)
        if self.latency_s:
            await asyncio.sleep(max(0.0, due - loop.time()))
        return response

    async def _answer(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path != f"{P}/health":
            auth = request.headers.get("Authorization", "")
            expected = base64.b64encode(f"{PUBLIC_KEY}:{SECRET_KEY}".encode()).decode()
            if auth != f"Basic {expected}":
                return web.json_response({"message": "Invalid credentials"}, status=401)
        for fault in self.faults:
            if fault.times > 0 and request.path.startswith(fault.path):
                if fault.after > 0:
                    fault.after -= 1
                    continue
                fault.times -= 1
                headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
                if fault.raw is not None:
                    return web.Response(body=fault.raw, status=fault.status, headers=headers,
                                        content_type="text/html")
                return web.json_response(fault.body or {"message": f"fault {fault.status}"},
                                         status=fault.status, headers=headers)
        return await handler(request)

    def _json(self, body: Any, schema: str | None) -> web.Response:
        if self.validator is not None and schema is not None:
            errors = self.validator.errors(schema, body)
            if errors:
                self.violations.extend(errors)
                return web.json_response({"message": "fake drifted from the spec",
                                          "errors": errors[:5]}, status=500)
        return web.json_response(body)

    def _prerendered(self, objs: list[dict[str, Any]], shape: tuple, render: Any,
                     meta: dict[str, Any]) -> web.Response:
        """A list answer assembled from each object's JSON, rendered once per shape."""
        rendered = self._rendered.setdefault(shape, {})
        parts = []
        for obj in objs:
            part = rendered.get(obj["id"])
            if part is None:
                part = rendered[obj["id"]] = json.dumps(render(obj)).encode()
            parts.append(part)
        body = b"".join((b'{"data":[', b",".join(parts), b'],"meta":', json.dumps(meta).encode(),
                         b"}"))
        return web.Response(body=body, content_type="application/json")

    def _served(self, path: str, n: int) -> None:
        self.served[path] = self.served.get(path, 0) + n

    def _gone(self) -> web.Response:
        return web.json_response({"message": "This endpoint is not available in Langfuse v4 "
                                  "(events_only mode)"}, status=404)

    def _limit(self, q: dict[str, Any], maximum: int) -> int | web.Response:
        """The ``limit`` a list request asks for, or the answer refusing it: 400 outside
        1..``maximum``, 422 (too heavy) above ``heavy_limit``."""
        limit = int(q.get("limit", 50))
        if limit > maximum or limit < 1:
            return web.json_response({"message": "Invalid request data",
                                      "error": [{"path": ["limit"]}]}, status=400)
        if self.heavy_limit is not None and limit > self.heavy_limit:
            return web.json_response({"error": "Request timed out"}, status=422)
        return limit

    def _paged(self, request: web.Request
               ) -> tuple[dict[str, Any], int, int] | web.Response:
        """A page-based (v3) list request as (query, page, limit), or the answer refusing it
        (404 on v4, 400 on a bad page or limit, 422 when too heavy)."""
        if self.generation == "v4":
            return self._gone()
        q = _query(request)
        page = int(q.get("page", 1))
        if page < 1:
            return web.json_response({"message": "Invalid request data",
                                      "error": [{"path": ["page"]}]}, status=400)
        limit = self._limit(q, 100)
        return limit if isinstance(limit, web.Response) else (q, page, limit)

    @staticmethod
    def _page(items: list[Any], page: int, limit: int) -> tuple[list[Any], dict[str, Any]]:
        total = len(items)
        meta = {"page": page, "limit": limit, "totalItems": total,
                "totalPages": (total + limit - 1) // limit}
        return items[(page - 1) * limit: page * limit], meta

    async def _health(self, request: web.Request) -> web.Response:
        version = "3.120.0" if self.generation == "v3" else "4.16.0"
        return self._json({"status": "OK", "version": version}, "HealthResponse")

    async def _traces(self, request: web.Request) -> web.Response:
        paged = self._paged(request)
        if isinstance(paged, web.Response):
            return paged
        q, page, limit = paged
        start = parse(q["fromTimestamp"]) if q.get("fromTimestamp") else None
        end = parse(q["toTimestamp"]) if q.get("toTimestamp") else None
        tags = set(q.get("tags", []))
        by_id = False
        if q.get("filter"):  # `filter` replaces every simple parameter
            conds = json.loads(q["filter"])
            by_id = any(c.get("column") == "id" for c in conds)
            items = [t for t in self.traces.values() if all(_cond(c, t, t) for c in conds)]
            start = end = None
            tags = set()
            q = {}
        else:
            items = list(self.traces.values())
        items = [t for t in items
                 if (start is None or parse(t["timestamp"]) >= start)
                 and (end is None or parse(t["timestamp"]) < end)
                 and (not q.get("name") or t.get("name") == q["name"])
                 and (not q.get("userId") or t.get("userId") == q["userId"])
                 and (not q.get("sessionId") or t.get("sessionId") == q["sessionId"])
                 and tags <= set(t.get("tags", []))
                 and (not q.get("environment") or t.get("environment") in q["environment"])]
        items.sort(key=lambda t: (t["timestamp"], t["id"]), reverse=True)
        groups = set((q.get("fields") or "core,io,scores,observations,metrics").split(","))
        data, meta = self._page(items, page, limit)
        self._served("traces by id" if by_id else "traces", len(data))
        return self._json({"data": [self.render_trace(t, groups) for t in data], "meta": meta},
                          "Traces")

    async def _observations_v1(self, request: web.Request) -> web.Response:
        paged = self._paged(request)
        if isinstance(paged, web.Response):
            return paged
        q, page, limit = paged
        key = json.dumps({k: v for k, v in q.items() if k not in ("page", "limit")},
                         sort_keys=True)
        self._index()
        items = self._cache.get(key)
        if items is None:  # the count query is what makes real page-based reads slow
            items = self._cache[key] = self.list_observations(q, v2=False)
        data, meta = self._page(items, page, limit)
        self._served("observations", len(data))
        if self.validator is None:
            return self._prerendered(data, ("v1",), self.render_v1, meta)
        return self._json({"data": [self.render_v1(o) for o in data], "meta": meta},
                          "legacyObservationsViews")

    async def _observation_v1(self, request: web.Request) -> web.Response:
        if self.generation == "v4":
            return self._gone()
        obs = self.observations.get(request.match_info["id"])
        if obs is None or not self._visible(obs["id"]):
            return web.json_response({"message": "Observation not found"}, status=404)
        self._served("observations by id", 1)
        return self._json(self.render_v1(obs), "ObservationsViewSingle")

    async def _observations_v2(self, request: web.Request) -> web.Response:
        if self.generation == "v3" and not self.v2_opt_in:
            return web.json_response({"message": "Not found"}, status=404)
        q = _query(request)
        limit = self._limit(q, 1000)
        if isinstance(limit, web.Response):
            return limit
        after = None
        if q.get("cursor"):
            pos = _position(q["cursor"])
            after = (pos["t"], pos["id"])
        items = self.list_observations(q, v2=True, after=after, limit=limit + 1)
        more = len(items) > limit
        items = items[:limit]
        by_id = any(c.get("column") == "id" for c in json.loads(q.get("filter") or "[]"))
        self._served("v2/observations by id" if by_id else "v2/observations", len(items))
        meta: dict[str, Any] = {}
        if more:
            last = items[-1]
            meta["cursor"] = _cursor({"t": parse(last["startTime"]).timestamp(),
                                      "id": last["id"]})
        groups = set((q.get("fields") or "core,basic").split(","))
        expand = set((q.get("expandMetadata") or "").split(","))
        if self.validator is None:  # benchmarks: the fake's CPU must not be what is measured
            return self._prerendered(items, ("v2", q.get("fields"), q.get("expandMetadata")),
                                     lambda o: self.render_v2(o, groups, expand), meta)
        return self._json({"data": [self.render_v2(o, groups, expand) for o in items],
                           "meta": meta}, "ObservationsV2Response")

    async def _scores_v2(self, request: web.Request) -> web.Response:
        paged = self._paged(request)
        if isinstance(paged, web.Response):
            return paged
        q, page, limit = paged
        data, meta = self._page(self.list_scores(q), page, limit)
        self._served("v2/scores", len(data))
        return self._json({"data": [self.render_score_v2(s) for s in data], "meta": meta},
                          "GetScoresResponse")

    async def _scores_v3(self, request: web.Request) -> web.Response:
        q = _query(request)
        limit = self._limit(q, 100)
        if isinstance(limit, web.Response):
            return limit
        items = self.list_scores(q)
        if q.get("cursor"):
            pos = _position(q["cursor"])
            items = [s for s in items if (s["timestamp"], s["id"]) < (pos["ts"], pos["id"])]
        page = items[:limit]
        self._served("v3/scores", len(page))
        meta: dict[str, Any] = {"limit": limit}
        if len(items) > limit:
            last = page[-1]
            meta["cursor"] = _cursor({"ts": last["timestamp"], "id": last["id"]})
        groups = set((q.get("fields") or "").split(","))
        return self._json({"data": [self.render_score_v3(s, groups) for s in page],
                           "meta": meta}, "GetScoresV3Response")

    async def _post_score(self, request: web.Request) -> web.Response:
        body = await request.json()
        errors = self.validator.errors("CreateScoreRequest", body) if self.validator else []
        targets = [k for k in ("traceId", "sessionId", "datasetRunId") if body.get(k)]
        if len(targets) != 1:
            errors.append("exactly one of traceId, sessionId, datasetRunId is required")
        dt = body.get("dataType") or ("CATEGORICAL" if isinstance(body.get("value"), str)
                                      else "NUMERIC")
        value = body.get("value")
        if dt == "BOOLEAN" and value not in (0, 1):
            errors.append("BOOLEAN scores take 0 or 1")
        if dt in ("CATEGORICAL", "TEXT") and not isinstance(value, str):
            errors.append(f"{dt} scores take a string value")
        if dt == "TEXT" and not 1 <= len(value or "") <= 500:
            errors.append("TEXT scores take 1 to 500 characters")
        if dt == "NUMERIC" and isinstance(value, str):
            errors.append("NUMERIC scores take a number")
        if errors:
            return web.json_response({"message": "Invalid request data", "error": errors},
                                     status=400)
        self.received.append(body)
        if not body.get("id"):
            # langfuse/langfuse#14797: accepted, never persisted
            return self._json({"id": str(uuid.uuid4())}, "CreateScoreResponse")
        now = iso(datetime.now(timezone.utc))
        self.scores[body["id"]] = {
            "id": body["id"], "traceId": body.get("traceId"),
            "observationId": body.get("observationId"), "sessionId": body.get("sessionId"),
            "datasetRunId": body.get("datasetRunId"), "name": body["name"],
            "source": body.get("source") or "API", "timestamp": now, "createdAt": now,
            "updatedAt": now, "authorUserId": None, "comment": body.get("comment"),
            "metadata": body.get("metadata"), "configId": body.get("configId"),
            "queueId": None, "environment": body.get("environment") or "default",
            "dataType": dt,
            "value": None if isinstance(value, str) else value,
            "stringValue": value if isinstance(value, str) else
            (("True" if value == 1 else "False") if dt == "BOOLEAN" else None),
        }
        if self.score_lag_s:
            self.visible_at[body["id"]] = time.monotonic() + self.score_lag_s
        return self._json({"id": body["id"]}, "CreateScoreResponse")

    # -- running ------------------------------------------------------------------------------

    def start(self) -> str:
        """Serve on 127.0.0.1 in a background thread; returns the base URL."""
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            runner = web.AppRunner(self.app(), access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self._runner = runner
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.url = f"http://127.0.0.1:{port}"
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True, name="fake-langfuse")
        self._thread.start()
        ready.wait(10)
        return self.url

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


def _query(request: web.Request) -> dict[str, Any]:
    """Query parameters; repeated ones (``environment``, trace ``tags``) as lists."""
    query: dict[str, Any] = {}
    for k, v in request.query.items():
        if k == "environment" or (k == "tags" and request.path.endswith("/traces")):
            query.setdefault(k, []).append(v)
        else:
            query[k] = v
    return query


def _cursor(position: dict[str, Any]) -> str:
    """An opaque cursor holding where the next page starts."""
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode()


def _position(cursor: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(cursor))


def _raw(value: Any) -> str | None:
    """v2 returns input/output as the stored string: JSON text for objects, as the JS
    ingestion stores it (``JSON.stringify``: compact)."""
    return value if value is None or isinstance(value, str) else \
        json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _cond(cond: dict[str, Any], obs: dict[str, Any], trace: dict[str, Any]) -> bool:
    col, op, value = cond["column"], cond["operator"], cond.get("value")
    if col in ("tags", "traceTags"):
        have = set(trace.get("tags", []))
        return set(value) <= have if op == "all of" else bool(set(value) & have)
    actual: Any
    if col in ("userId", "sessionId"):
        actual = trace.get(col)
    elif col == "level":
        actual = obs.get("level") or "DEFAULT"
    elif col == "environment":
        actual = obs.get("environment") or "default"
    else:
        actual = obs.get(col)
    if cond["type"] == "datetime":
        a, b = parse(actual), parse(value)
        return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op]
    if op == "any of":
        return actual in value
    if op == "none of":
        return actual not in value
    if op == "=":
        return actual == value
    raise ValueError(f"fake: unsupported filter {cond}")


# -- realistic data ---------------------------------------------------------------------------

_QUESTIONS = [
    "Summarise the quarterly report for the board in three sentences.",
    "Translate the following paragraph into French: the meeting is moved to Tuesday.",
    "Write a SQL query that counts orders per customer in 2025.",
    "Explain why the build failed given this log: error TS2304 cannot find name.",
    "Draft a polite reply declining the vendor's proposal.",
]


def make_dataset(server: FakeLangfuse, n_traces: int, start: datetime, end: datetime,
                 seed: int = 7) -> dict[str, Any]:
    """Traces with a SPAN root and GENERATION children: answers, prompt echoes, refusals, and
    failed calls (ERROR level with request envelopes, HTTP error bodies, null output), plus
    scores on observations and traces. Returns what a test needs to know about it."""
    rng = random.Random(seed)
    span = (end - start) / max(1, n_traces)
    kinds: dict[str, str] = {}
    for i in range(n_traces):
        t0 = start + span * i + timedelta(seconds=rng.random())
        tid = f"trace-{i:05d}"
        question = _QUESTIONS[i % len(_QUESTIONS)]
        server.add_trace({
            "id": tid, "timestamp": iso(t0), "name": "support-agent", "input": {"q": question},
            "output": {"answer": f"Done ({i})"}, "sessionId": f"sess-{i % 7}",
            "release": "1.4.0", "version": None, "userId": f"user-{i % 5}",
            "metadata": {"tenant": "acme"}, "tags": ["prod"] + (["beta"] if i % 3 == 0 else []),
            "public": False, "environment": "production" if i % 4 else "staging",
        })
        root = f"span-{i:05d}"
        server.add_observation(_obs(root, tid, "SPAN", "agent-run", t0, t0 + timedelta(
            seconds=3), None, {"q": question}, {"answer": "done"}, i))
        for j in range(2):
            oid = f"gen-{i:05d}-{j}"
            g0 = t0 + timedelta(milliseconds=100 + 900 * j)
            kind = ["ok", "ok", "ok", "echo", "refusal", "envelope", "http_error", "null"][
                (i * 2 + j) % 8]
            kinds[oid] = kind
            prompt = [{"role": "user", "content": question}]
            output: Any = {"role": "assistant", "content": f"Here is the answer to item {i}: "
                           "the report shows revenue growth of 12 percent."}
            level, status = "DEFAULT", None
            if kind == "echo":
                output = question
            elif kind == "refusal":
                output = "I'm sorry, but I can't help with that request."
            elif kind == "envelope":
                level, status = "ERROR", "429 Too Many Requests"
                output = {"completion": None, "reasoning": None,
                          "rawRequest": {"model": "gpt-4o-mini", "messages": prompt}}
            elif kind == "http_error":
                output = {"error": {"message": "upstream timeout", "code": 504}}
            elif kind == "null":
                level, status, output = "ERROR", "stream closed", None
            obs = _obs(oid, tid, "GENERATION", "llm-call", g0,
                       g0 + timedelta(milliseconds=400 + rng.randint(0, 800)), root, prompt,
                       output, i, level=level, status=status)
            server.add_observation(obs)
            if kind == "ok" and i % 3 == 0:
                server.add_score(score(f"sc-h-{oid}", "hallucination", "NUMERIC", g0,
                                       observation=oid, trace=tid, value=rng.random(),
                                       comment="claims checked against the context"))
            if i % 4 == 1:
                server.add_score(score(f"sc-b-{oid}", "helpful", "BOOLEAN", g0,
                                       observation=oid, trace=tid, value=float(j % 2),
                                       string_value="True" if j % 2 else "False"))
            if i % 5 == 2 and j == 0:
                server.add_score(score(f"sc-c-{oid}", "tone", "CATEGORICAL", g0,
                                       observation=oid, trace=tid, value=0.0,
                                       string_value="neutral"))
        if i % 6 == 0:
            server.add_score(score(f"sc-t-{tid}", "user_feedback", "NUMERIC", t0, trace=tid,
                                   value=1.0, comment="thumbs up"))
        if i % 10 == 3:  # an evaluator scored the agent span, not a generation
            server.add_score(score(f"sc-s-{root}", "hallucination", "NUMERIC", t0,
                                   observation=root, trace=tid, value=0.5))
    # a generation the bulk list misses (langfuse/langfuse#12842) but a score points at,
    # and a score pointing at an observation the server does not have at all
    t0 = start + span
    hidden = _obs("gen-hidden-0", "trace-00001", "GENERATION", "llm-call", t0,
                  t0 + timedelta(seconds=1), "span-00001", [{"role": "user", "content": "hi"}],
                  "Hello! How can I help?", 1)
    server.add_observation(hidden)
    server.hidden_from_list.add("gen-hidden-0")
    server.add_score(score("sc-hidden", "hallucination", "NUMERIC", t0,
                           observation="gen-hidden-0", trace="trace-00001", value=0.1))
    server.add_score(score("sc-ghost", "hallucination", "NUMERIC", t0,
                           observation="gen-ghost-0", trace="trace-00001", value=0.9))
    kinds["gen-hidden-0"] = "ok"
    return {"kinds": kinds}


def _obs(oid: str, tid: str, typ: str, name: str, t0: datetime, t1: datetime,
         parent: str | None, inp: Any, out: Any, i: int, level: str = "DEFAULT",
         status: str | None = None) -> dict[str, Any]:
    gen = typ == "GENERATION"
    usage = {"input": 120 + i % 50, "output": 80 + i % 30} if gen else {}
    if usage:
        usage["total"] = usage["input"] + usage["output"]
    # one in ten generations has no price known to Langfuse: cost stays absent
    cost = {"input": usage["input"] * 1.5e-7, "output": usage["output"] * 6e-7} \
        if gen and i % 10 else {}
    if cost:
        cost["total"] = cost["input"] + cost["output"]
    return {
        "id": oid, "traceId": tid, "type": typ, "name": name, "startTime": iso(t0),
        "endTime": iso(t1), "completionStartTime": None,
        "model": ["gpt-4o-mini", "llama-3.2-3b"][i % 2] if gen else None,
        "modelParameters": {"temperature": 0.2} if gen else None, "input": inp, "output": out,
        "version": None, "metadata": {"tenant": "acme", "note": "x" * 250} if gen else {},
        "level": level, "statusMessage": status, "parentObservationId": parent,
        "promptId": None, "promptName": "support" if gen else None,
        "promptVersion": 3 if gen else None, "usageDetails": usage, "costDetails": cost,
        "environment": "production",
    }


def score(sid: str, name: str, data_type: str, ts: datetime, *, observation: str | None = None,
          trace: str | None = None, value: float | None = None, string_value: str | None = None,
          comment: str | None = None) -> dict[str, Any]:
    """A stored score as the server keeps it."""
    return {"id": sid, "traceId": trace, "observationId": observation, "sessionId": None,
            "datasetRunId": None, "name": name, "source": "EVAL", "timestamp": iso(ts),
            "createdAt": iso(ts), "updatedAt": iso(ts), "authorUserId": None,
            "comment": comment, "metadata": {"evaluator": "lf-judge"}, "configId": None,
            "queueId": None, "environment": "production", "dataType": data_type,
            "value": value, "stringValue": string_value}


def bulk_generations(server: FakeLangfuse, n: int, start: datetime, end: datetime) -> None:
    """``n`` small GENERATION observations spread evenly over the window (benchmarks)."""
    step = (end - start) / n
    for i in range(n):
        t0 = start + step * i
        obs = _obs(f"b-{i:07d}", f"bt-{i // 4:07d}", "GENERATION", "llm-call", t0,
                   t0 + timedelta(milliseconds=500), None, "question", "answer", i)
        obs["metadata"] = {"tenant": "acme"}
        server.observations[obs["id"]] = obs
    server._dirty = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generation", choices=("v3", "v4"), default="v4")
    parser.add_argument("--observations", type=int, default=50_000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--start", default="2026-05-01T00:00:00Z")
    parser.add_argument("--end", default="2026-05-08T00:00:00Z")
    parser.add_argument("--prerender", action="store_true",
                        help="render every observation before serving")
    parser.add_argument("--fields", default="core,basic,time,io,metadata,model,usage,prompt,"
                        "metrics,trace_context", help="v2 field groups to prerender")
    args = parser.parse_args()
    server = FakeLangfuse(args.generation, latency_s=args.latency, validate=False)
    bulk_generations(server, args.observations, parse(args.start), parse(args.end))
    server._index()
    if args.prerender:  # render every object once before serving, as a real server's
        for obs in server.observations.values():  # database would already hold them
            server._rendered.setdefault(("v1",), {})[obs["id"]] = json.dumps(
                server.render_v1(obs)).encode()
            server._rendered.setdefault(("v2", args.fields, None), {})[obs["id"]] = json.dumps(
                server.render_v2(obs, set(args.fields.split(",")), set())).encode()
    url = server.start()
    print("PORT", url.rsplit(":", 1)[1], flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
