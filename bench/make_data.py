"""Synthetic LLM generations shaped like a real audit: several models, a share of failed API
calls logged as request envelopes, HTTP error bodies, prompt echoes and refusals.

``python bench/make_data.py quickstart`` regenerates ``evalkit/data/quickstart.jsonl``;
``python bench/make_data.py big N PATH`` writes N records for the benchmarks, each with its
own case number in the user message and the answer: like real traffic, prompts and outputs
rarely repeat, so work done once per distinct text (normalisation, comparisons, Parquet
dictionaries) is not flattered by nine prompts repeated a million times."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

MODELS = {  # name -> (share of calls, $ per 1M input tokens, $ per 1M output tokens)
    "llama-3.2-3b-instruct": (0.3, 0.06, 0.06),
    "gemma-3-12b-it": (0.25, 0.1, 0.2),
    "gpt-4o-mini": (0.25, 0.15, 0.6),
    "claude-3-5-haiku": (0.2, 0.8, 4.0),
}
TASKS = [
    ("summarize", "You are a concise assistant. Summarize the ticket in one sentence.",
     ["The customer reports that CSV exports time out for reports larger than 10,000 rows "
      "since the last release.",
      "A user cannot reset their password because the reset e-mail never arrives; spam "
      "folder checked.",
      "Billing shows a duplicate charge for the March invoice on the enterprise plan."],
     ["CSV exports over 10k rows time out since the last release.",
      "Password-reset e-mails are not being delivered to the user.",
      "The enterprise customer was charged twice for March."]),
    ("extract", "Extract the fields as JSON with keys name, city, date. Output only JSON.",
     ["Maria Keller will arrive in Zurich on 2026-03-14 for the audit.",
      "On 2026-05-02 Tomás Silva flies to Lisbon.",
      "Aiko Tanaka's visit to Osaka is booked for 2026-07-21."],
     ['{"name": "Maria Keller", "city": "Zurich", "date": "2026-03-14"}',
      '{"name": "Tomás Silva", "city": "Lisbon", "date": "2026-05-02"}',
      '{"name": "Aiko Tanaka", "city": "Osaka", "date": "2026-07-21"}']),
    ("answer", "Answer from the context only. Say 'not in context' otherwise.",
     ["Context: The Eiffel Tower was completed in 1889. Question: When was it completed?",
      "Context: Rust 1.0 was released in May 2015. Question: When was Rust 1.0 released?",
      "Context: The Nile flows into the Mediterranean Sea. Question: Where does it flow?"],
     ["It was completed in 1889.", "Rust 1.0 was released in May 2015.",
      "The Nile flows into the Mediterranean Sea."]),
]
REFUSAL = "I'm sorry, but I can't help with that request."


def _messages(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def records(n: int, seed: int = 7, failure_share: float = 0.25,
            numbered: bool = False) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    names = list(MODELS)
    weights = [MODELS[m][0] for m in names]
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    for i in range(n):
        model = rng.choices(names, weights)[0]
        task, system, inputs, answers = rng.choice(TASKS)
        k = rng.randrange(len(inputs))
        user, answer = inputs[k], answers[k]
        if numbered:
            user, answer = f"Case {i}. {user}", f"Case {i}: {answer}"
        messages = _messages(system, user)
        small = model.startswith(("llama", "gemma"))
        rec: dict[str, Any] = {
            "id": f"obs-{seed}-{i:07d}",
            "trace_id": f"trace-{seed}-{i // 2:07d}",
            "timestamp": (start + timedelta(seconds=37 * i)).isoformat().replace("+00:00",
                                                                                 "Z"),
            "model": model,
            "task": task,
            "level": "DEFAULT",
            "status_message": None,
            "input": messages,
        }
        roll = rng.random()
        if roll < failure_share * 0.6:
            slug = model if rng.random() < 0.5 else model.replace("-", "_") + "-latest"
            rec.update(level="ERROR", status_message=rng.choice([
                "Error code: 400 - max_tokens is too large: 720000. This model supports at "
                "most 16384 completion tokens.",
                f"Error code: 404 - The model `{slug}` does not exist or you do not have "
                f"access to it."]),
                output={"completion": None, "reasoning": None,
                        "rawRequest": {"model": slug, "max_tokens": 720000,
                                       "messages": messages}},
                latency_s=round(rng.uniform(0.05, 0.4), 3), usage={"input": 0, "output": 0},
                cost={"total": 0.0})
        elif roll < failure_share * 0.85:
            # the SDK logged the HTTP error body as the output and left the level alone
            rec.update(output={"error": {"message": "Rate limit reached for requests",
                                         "type": "rate_limit_exceeded", "code": 429}},
                       latency_s=round(rng.uniform(0.02, 0.2), 3),
                       usage={"input": 0, "output": 0}, cost={"total": 0.0})
        elif roll < failure_share:
            rec.update(output="" if rng.random() < 0.5 else None,
                       status_message="stream closed before the first token",
                       latency_s=round(rng.uniform(5, 30), 3), usage={"input": 40, "output": 0},
                       cost={"total": None})
        else:
            behaviour = rng.random()
            if small and behaviour < 0.25:
                output = user if rng.random() < 0.6 else f"{system} {user}"
            elif behaviour < 0.3:
                output = REFUSAL
            else:
                output = answer
            tin, tout = rng.randint(40, 160), max(5, len(output) // 4 + rng.randint(-3, 10))
            _, pin, pout = MODELS[model]
            rec.update(output=output, latency_s=round(rng.lognormvariate(-0.3, 0.6), 3),
                       usage={"input": tin, "output": tout},
                       cost={"total": round((tin * pin + tout * pout) / 1e6, 8)})
        yield rec


def write(path: str, n: int, seed: int = 7, numbered: bool = False) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for rec in records(n, seed, numbered=numbered):
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["quickstart"]:
        write("evalkit/data/quickstart.jsonl", 160)
    elif sys.argv[1:2] == ["big"]:
        write(sys.argv[3], int(sys.argv[2]), seed=11, numbered=True)
    else:
        sys.exit(__doc__)
