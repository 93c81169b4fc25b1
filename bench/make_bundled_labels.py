"""The bundled label samples the ``judge_agreement`` and ``audit`` experiments correct their
judges with (``evalkit/data/*_labels.jsonl``): a simple random sample of each data set's
records, labelled from the data's own ground truth.

- ``begin_wow_labels.jsonl``: 30 of the 300 BEGIN records (10%), each with its annotators'
  ``human_label`` (1 = not fully attributable), answering the ``words`` judge's question;
- ``audit_labels.jsonl``: 20 of the 44 genuine completions of the audit data, labelled 1 when
  the generation was written to hallucinate (``expected_mode`` fabricated_tool_api or
  tool_output_misinterpretation), answering the imported ``Hallucination`` judge's question.

Deterministic: ``python bench/make_bundled_labels.py`` always writes the same bytes."""

from __future__ import annotations

import json
import random
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "evalkit" / "data"
HALLUCINATED = {"fabricated_tool_api", "tool_output_misinterpretation"}


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def main() -> None:
    begin = [json.loads(line) for line in (DATA / "begin_wow.jsonl").open()]
    picked = sorted(random.Random(31).sample(range(len(begin)), 30))
    _write(DATA / "begin_wow_labels.jsonl", [
        {"record_id": begin[i]["id"], "judge": "words", "value": float(begin[i]["human_label"]),
         "labeler": "BEGIN annotators", "labelled_at": "2022-01-01T00:00:00Z",
         "design": "random", "inclusion_prob": 30 / len(begin), "source": "BEGIN (Dziri et al.)"}
        for i in picked])
    audit = [json.loads(line) for line in (DATA / "audit.jsonl").open()]
    genuine = [r for r in audit if r["level"] != "ERROR"]
    picked = sorted(random.Random(31).sample(range(len(genuine)), 20))
    _write(DATA / "audit_labels.jsonl", [
        {"record_id": genuine[i]["id"], "judge": "Hallucination",
         "value": float(genuine[i]["expected_mode"] in HALLUCINATED),
         "labeler": "audit author (expected_mode)", "labelled_at": "2026-11-01T00:00:00Z",
         "design": "random", "inclusion_prob": 20 / len(genuine), "source": "make_audit_data"}
        for i in picked])


if __name__ == "__main__":
    main()
