"""The bundled audit data set (``evalkit/data/audit.jsonl``): 72 generations shaped like the
self-hosted Langfuse audit that motivated evalkit.

- 28 failed API calls (``level=ERROR``: an invalid model slug, ``max_tokens`` of 720000)
  whose logged output is the SDK's request envelope
  (``{"completion": null, "reasoning": null, "rawRequest": {...}}``);
- 44 genuine completions from five models, among them examples of the four failure modes:
  A prompt echo, B fabricated tool APIs, C tool-output misinterpretation (a runner said
  ``success: true`` for a failed command), D instruction skipping;
- two imported judges per generation, as Langfuse exports them (a ``scores`` list of
  ``{name, value, comment}``): ``Hallucination``, which flags 86% of the generations, the
  failed calls included ("an exact copy of the input prompt"), and ``Correctness``,
  scored independently of it;
- ``expected_mode``: the failure mode the generation was written to show (ground truth for
  tests; it lands in the records' ``metadata``).

Deterministic: ``python bench/make_audit_data.py [PATH]`` always writes the same bytes."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

SEED = 20261244  # picked so the two imported judges correlate about as weakly as in the audit
OUT = Path(__file__).resolve().parents[1] / "evalkit" / "data" / "audit.jsonl"
SMALL = ["llama-3.2-3b-instruct", "gemma-3-12b-it", "qwen-2.5-7b-instruct"]
LARGE = ["mistral-small-24b", "gpt-4o-mini"]
MODELS = SMALL + LARGE

EXTRACT_SYSTEM = ("Extract the fields as JSON with keys name, city and date (YYYY-MM-DD). "
                  "Output only JSON.")
EXTRACT_INPUTS = [
    "Maria Keller will arrive in Zurich on 2026-03-14 for the audit.",
    "On 2026-05-02 Tomás Silva flies to Lisbon.",
    "Aiko Tanaka's visit to Osaka is booked for 2026-07-21.",
    "Jonas Berg lands in Oslo on 2026-09-30 after the conference.",
]
CLASSIFY_SYSTEM = ("Classify the support ticket as one of: billing, bug, account, other. "
                   "Answer with a JSON object {\"category\": ..., \"reason\": ...}.")
TICKETS = [
    "I was charged twice for the March invoice on the enterprise plan.",
    "Exports to CSV time out for reports larger than ten thousand rows.",
    "I cannot reset my password because the reset e-mail never arrives.",
    "The dashboard shows last week's numbers even after a refresh.",
]
AGENT_SYSTEM = (
    "You are the community bot of the forum. For every new post, follow ALL steps in "
    "order:\n1. Read the post and the thread it belongs to.\n2. Write a helpful reply of "
    "at most 120 words.\n3. Post the reply with the comment_post tool.\n4. Upvote the post "
    "with the upvote tool if it is on topic.\n5. Update the thread's last_checked timestamp "
    "with the update_thread tool.\n6. Report which of the steps you completed.\n"
    "Never skip a step; if a tool fails, say so.")
POSTS = [
    "How do I rotate the API keys of a self-hosted Langfuse without downtime?",
    "Is there a way to export traces to Parquet for offline analysis?",
    "Our evaluator scores look random. How should we validate an LLM judge?",
    "What is the recommended retention policy for observation payloads?",
]
TOOL_SYSTEM = ("You can call the search_issues tool to look up tickets in the tracker. "
               "Answer the user's question about open issues.")
TOOL_QUESTIONS = [
    "Which open issues mention the export timeout?",
    "Are there open bugs about password reset e-mails?",
    "List the issues assigned to the billing team.",
]
SHELL_SYSTEM = ("You are a coding agent. Run shell commands with the run tool, read their "
                "results, and report what happened.")
SHELL_TASKS = [
    ("Commit the fix with the message 'fix export timeout'.",
     "git comit -m 'fix export timeout'",
     "git: 'comit' is not a git command. See 'git --help'.",
     "Committed the fix with the message 'fix export timeout'. Next I will push the branch "
     "to origin."),
    ("Install the project's dependencies.",
     "pip instal -r requirements.txt",
     "ERROR: unknown command \"instal\" - maybe you meant \"install\"",
     "All dependencies are installed, so the project is ready to run the test suite."),
    ("Run the unit tests for the exporter.",
     "pytest tests/exporter -q --maxfail",
     "pytest: argument --maxfail: expected one argument",
     "The exporter tests ran and everything passed; the change is safe to merge."),
    ("Create the release tag v1.4.0.",
     "git tag -a v1.4.0 -m",
     "error: switch `m' requires a value",
     "Tagged the release as v1.4.0, it is ready to be pushed."),
    ("Apply the database migration.",
     "alembic upgrade heads --sql-only",
     "alembic: error: unrecognized arguments: --sql-only",
     "The migration has been applied to the database and the schema is up to date."),
    ("Delete the temporary build directory.",
     "rm -r ./build/tmp/*.partial",
     "rm: cannot remove './build/tmp/*.partial': No such file or directory",
     "Removed the temporary build directory; the workspace is clean now."),
]
ERROR_MESSAGES = [
    "Error code: 400 - max_tokens is too large: 720000. This model supports at most "
    "16384 completion tokens, whereas you provided 720000.",
    "Error code: 404 - The model `{slug}` does not exist or you do not have access to it.",
    "Error code: 400 - {slug} is not a valid model ID",
]


def _messages(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _score(rng: random.Random, flagged: bool) -> float:
    return round(rng.uniform(0.92, 1.0) if flagged else rng.uniform(0.05, 0.35), 3)


def _extract_answer(text: str) -> str:
    for line, answer in zip(EXTRACT_INPUTS, [
        {"name": "Maria Keller", "city": "Zurich", "date": "2026-03-14"},
        {"name": "Tomás Silva", "city": "Lisbon", "date": "2026-05-02"},
        {"name": "Aiko Tanaka", "city": "Osaka", "date": "2026-07-21"},
        {"name": "Jonas Berg", "city": "Oslo", "date": "2026-09-30"},
    ], strict=True):
        if line == text:
            return json.dumps(answer, ensure_ascii=False)
    raise KeyError(text)


def _genuine(rng: random.Random) -> Iterator[dict[str, Any]]:
    """The 44 genuine completions: (mode, model, input, output, context, flagged)."""
    # A: prompt echo, mostly small models on structured tasks
    for k in range(8):
        model = SMALL[k % 3] if k < 7 else LARGE[0]
        if k % 2 == 0:
            user = EXTRACT_INPUTS[k // 2 % 4]
            yield dict(mode="prompt_echo", model=model, task="extract",
                       input=_messages(EXTRACT_SYSTEM, user),
                       output=user if k % 4 == 0 else f"{EXTRACT_SYSTEM}\n{user}")
        else:
            user = TICKETS[k // 2 % 4]
            yield dict(mode="prompt_echo", model=model, task="classify",
                       input=_messages(CLASSIFY_SYSTEM, user), output=user)
    # B: fabricated tool APIs: the model never saw search_issues' schema
    fabricated = [
        "I called POST /api/v2/issues/search with {\"query\": \"export timeout\", "
        "\"state\": \"open\", \"include_comments\": true} and it returned issues #4521 and "
        "#4533, both tagged export-timeout.",
        "Using search_issues(filter='label:password-reset AND status:open', "
        "fields=['assignee','sla_deadline']) the tracker reports 3 open bugs; the oldest has "
        "sla_deadline 2026-10-02.",
        "The billing team's queue endpoint GET /teams/billing/issues?open=1 lists 7 issues; "
        "the response field `escalation_score` is highest for #881.",
    ]
    for k in range(7):
        yield dict(mode="fabricated_tool_api", model=MODELS[(k + 1) % 5], task="tool_use",
                   input=_messages(TOOL_SYSTEM, TOOL_QUESTIONS[k % 3]),
                   output=fabricated[k % 3])
    # C: tool-output misinterpretation: the runner said success for a failed command
    for k, (task, cmd, stderr, output) in enumerate(SHELL_TASKS):
        result = {"tool": "run", "command": cmd, "success": True,
                  "exit_code": 1 if k % 2 == 0 else 2, "stdout": "", "stderr": stderr}
        if k == 5:  # nested result, logged as a JSON string
            result = {"tool": "run", "success": True,
                      "result": json.dumps({"returncode": 1, "stderr": stderr})}
        yield dict(mode="tool_output_misinterpretation", model=MODELS[k % 5],
                   task="agent", input=_messages(SHELL_SYSTEM, task), output=output,
                   context=[json.dumps(result)])
    # D: instruction skipping: the side-effecting steps silently skipped
    replies = [
        "Rotate keys by adding the new key first, switching clients over, then revoking the "
        "old one; Langfuse accepts several active keys, so there is no downtime.",
        "Yes: query the traces through the public API and write them with pyarrow to "
        "Parquet; a nightly job keeps the export current.",
        "Validate the judge against a small human-labelled set, check agreement with a "
        "second judge, and set aside failed calls before scoring.",
        "Keep full payloads for 30 days and aggregated scores for a year; older payloads "
        "can be moved to object storage.",
    ]
    for k in range(7):
        yield dict(mode="instruction_skipping", model=MODELS[(k + 2) % 5], task="agent",
                   input=_messages(AGENT_SYSTEM, POSTS[k % 4]),
                   output=replies[k % 4] + (" Steps completed: 1, 2." if k % 3 == 0 else ""))
    # genuine, correct answers: 6 flagged anyway by the hallucination judge, 10 not
    good: list[dict[str, Any]] = []
    for k in range(16):
        kind = k % 4
        model = MODELS[k % 5]
        if kind == 0:
            user = EXTRACT_INPUTS[k // 4]
            good.append(dict(task="extract", model=model, input=_messages(EXTRACT_SYSTEM, user),
                             output=_extract_answer(user)))
        elif kind == 1:
            cats = ["billing", "bug", "account", "bug"]
            good.append(dict(task="classify", model=model,
                             input=_messages(CLASSIFY_SYSTEM, TICKETS[k // 4]),
                             output=json.dumps({"category": cats[k // 4],
                                                "reason": "matches the ticket's topic"})))
        elif kind == 2:
            task, cmd, stderr, _ = SHELL_TASKS[k // 4]
            ok = k // 4 != 1
            result = {"tool": "run", "command": cmd.replace("comit", "commit"),
                      "success": ok, "exit_code": 0 if ok else 1,
                      "stdout": "done" if ok else "", "stderr": "" if ok else stderr}
            if k // 4 == 3:  # the runner mislabels, but the model notices
                result = {"tool": "run", "command": cmd, "success": True, "exit_code": 1,
                          "stderr": stderr}
            output = ("The command ran cleanly (exit code 0); the task is done." if ok and
                      k // 4 != 3 else "The command failed with exit code 1 (stderr: "
                      f"{stderr}); I will fix the arguments and retry.")
            good.append(dict(task="agent", model=model, input=_messages(SHELL_SYSTEM, task),
                             output=output, context=[json.dumps(result)]))
        else:
            good.append(dict(task="agent", model=model,
                             input=_messages(AGENT_SYSTEM, POSTS[k // 4]),
                             output="Reply posted with comment_post, post upvoted, "
                                    "last_checked updated. Steps completed: 1-6."))
    flagged_good = set(rng.sample(range(16), 6))
    for k, g in enumerate(good):
        yield dict(mode="none", flagged=k in flagged_good, **g)


def _failed(rng: random.Random, i: int) -> dict[str, Any]:
    model = MODELS[i % 5]
    slug = model if i % 3 else model.replace("-", "_") + ":latest"
    kind = i % 3
    message = ERROR_MESSAGES[kind].format(slug=slug)
    task_system, user = [(EXTRACT_SYSTEM, EXTRACT_INPUTS[i % 4]),
                         (CLASSIFY_SYSTEM, TICKETS[i % 4]),
                         (AGENT_SYSTEM, POSTS[i % 4])][i % 3]
    messages = _messages(task_system, user)
    envelope: Any = {"completion": None, "reasoning": None,
                     "rawRequest": {"model": slug, "max_tokens": 720000 if kind == 0 else 4096,
                                    "temperature": 0.2, "messages": messages}}
    if i % 7 == 0:  # some SDKs log the envelope as pretty-printed JSON text
        envelope = json.dumps(envelope, indent=2, ensure_ascii=False)
    return dict(mode="pipeline_failure", model=model, task=["extract", "classify", "agent"][i % 3],
                input=messages, output=envelope, level="ERROR", status_message=message,
                flagged=True)


def records() -> list[dict[str, Any]]:
    """The 72 rows of the data set, in a fixed shuffled order."""
    rng = random.Random(SEED)
    items = [_failed(rng, i) for i in range(28)] + list(_genuine(rng))
    rng.shuffle(items)
    start = datetime(2026, 11, 1, 8, 0, tzinfo=timezone.utc)
    rows = []
    for i, item in enumerate(items):
        mode = item["mode"]
        flagged = item.get("flagged", mode != "none")
        level = item.get("level", "WARNING" if i % 17 == 5 else "DEFAULT")
        hallucination = _score(rng, flagged)
        comment = ("The output is an exact copy of the input prompt." if mode in (
            "pipeline_failure", "prompt_echo") else
                   "The output states facts not supported by the input." if flagged else
                   "The output is grounded in the input.")
        rows.append({
            "id": f"obs-{i:03d}",
            "trace_id": f"trace-{i // 2:03d}",
            "timestamp": (start + timedelta(minutes=13 * i)).isoformat().replace("+00:00",
                                                                                 "Z"),
            "model": item["model"],
            "level": level,
            "status_message": item.get("status_message",
                                       "retried after HTTP 429" if level == "WARNING"
                                       else None),
            "task": item["task"],
            "input": item["input"],
            "output": item["output"],
            "tool_results": item.get("context"),
            "latency_s": round(rng.uniform(0.05, 0.3) if mode == "pipeline_failure"
                               else rng.uniform(0.6, 9.0), 3),
            "expected_mode": mode,
            "scores": [
                {"name": "Hallucination", "value": hallucination, "comment": comment},
                {"name": "Correctness", "value": round(rng.uniform(0.0, 1.0), 3),
                 "comment": "scored against the task description"},
            ],
        })
    return rows


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv else OUT
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records())
    path.write_text(text, encoding="utf-8")
    print(f"wrote {len(text.splitlines())} records to {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
