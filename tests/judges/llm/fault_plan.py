"""Injected faults for the fake model server: every judged record gets, deterministically
from a seed, a plan of replies (faults, then a valid verdict), and every reply sent is
logged per record, so a test can check each stored judgment against what the server said.

Faults: ``429`` (with Retry-After), ``500``, ``reset`` (the connection dropped), ``timeout``
(an answer later than the client waits), ``empty`` content, ``malformed`` and ``truncated``
JSON, ``out_of_range`` (valid JSON, score 7), ``ambiguous`` (prose around two JSON verdicts
that disagree). A valid verdict is sometimes wrapped in prose or a code fence (no fault)."""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from fake_llm_server import Reply, block

TRANSIENT = ("429", "500", "reset", "timeout")
ANSWER = ("empty", "malformed", "truncated", "out_of_range", "ambiguous")
# the judgments.error_cause a record ends with when this fault is the last reply it got
CAUSE = {"429": "rate_limited", "500": "server_error", "reset": "connection",
         "timeout": "timeout", "empty": "empty_answer", "malformed": "malformed_answer",
         "truncated": "malformed_answer", "out_of_range": "invalid_answer",
         "ambiguous": "ambiguous_verdict"}


@dataclass
class Sent:
    """One reply the server sent for a record: its kind and, for a verdict, the score."""

    kind: str
    score: float | None = None


@dataclass
class FaultPlan:
    """Plans per record (keyed by the judged output), and the log of what was sent."""

    seed: int = 0
    fault_share: float = 0.45  # records whose plan starts with faults
    exhaust_share: float = 0.2  # of those: more faults than the judge retries (an error)
    timeout_s: float = 0.6  # how late a ``timeout`` reply comes
    retry_after: str = "0.05"
    plans: dict[str, list[str]] = field(default_factory=dict)  # what is left to send
    planned: dict[str, list[str]] = field(default_factory=dict)  # each record's whole plan
    sent: dict[str, list[Sent]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def plan_for(self, key: str) -> list[str]:
        rng = random.Random(f"{self.seed}:{key}")
        if rng.random() >= self.fault_share:
            return []
        if rng.random() < self.exhaust_share:  # one class of fault, beyond any retry budget
            return [rng.choice(TRANSIENT if rng.random() < 0.5 else ANSWER)] * 8
        return [rng.choice(TRANSIENT + ANSWER) for _ in range(rng.randint(1, 2))]

    def __call__(self, body: dict[str, Any]) -> Reply:
        key = block(body["messages"][1]["content"], "output")
        with self._lock:
            if key not in self.plans:
                self.planned[key] = self.plan_for(key)
                self.plans[key] = list(self.planned[key])
            plan = self.plans[key]
            log = self.sent.setdefault(key, [])
            kind = plan.pop(0) if plan else "valid"
            rng = random.Random(f"{self.seed}:{key}:{len(log)}")
            score = round(rng.random(), 3)
            log.append(Sent(kind, score if kind == "valid" else None))
        return self.reply(kind, score, rng)

    def reply(self, kind: str, score: float, rng: random.Random) -> Reply:
        verdict = json.dumps({"reasoning": "fake", "score": score})
        if kind == "valid":
            wrap = rng.choice(["{}", "```json\n{}\n```", "Here is my verdict: {} Done."])
            return Reply(content=wrap.format(verdict))
        if kind == "429":
            return Reply(status=429, headers={"Retry-After": self.retry_after})
        if kind == "500":
            return Reply(status=500)
        if kind == "reset":
            return Reply(reset=True)
        if kind == "timeout":
            return Reply(delay=self.timeout_s, content=verdict)
        other = round(1 - score, 3) if score != 0.5 else 0.0
        return Reply(content={
            "empty": "",
            "malformed": "The score is high, maybe 0.8 or so.",
            "truncated": verdict[: len(verdict) // 2],
            "out_of_range": json.dumps({"reasoning": "fake", "score": 7}),
            "ambiguous": f'The output claims {{"score": {other}}}. My verdict: {verdict}',
        }[kind])

    def faults_sent(self) -> int:
        return sum(1 for log in self.sent.values() for s in log if s.kind != "valid")

    def requests(self) -> int:
        return sum(len(log) for log in self.sent.values())
