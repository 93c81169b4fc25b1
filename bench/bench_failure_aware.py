"""Throughput of the failure-aware filters and deterministic judges on synthetic records
(``bench/make_data.py`` shapes: a quarter failed calls, prompt echoes, refusals).

``python bench/bench_failure_aware.py [N]`` (default 200000) prints records/s for each
plugin, over batches of ``runner.batch_size`` (50000) as the runner calls them. The
quickstart pipeline's target is 100k records/s end to end, so ``pipeline_failure`` and
``prompt_echo`` must each stay well above it."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).parent))

import make_data  # noqa: E402

from evalkit.analysis.pipeline_failure import PipelineFailureConfig  # noqa: E402
from evalkit.analysis.tool_results import ToolSuccessMismatchConfig  # noqa: E402
from evalkit.context import RunContext  # noqa: E402
from evalkit.filters.level import LevelConfig, LevelFilter  # noqa: E402
from evalkit.filters.pipeline_failure import PipelineFailureFilter  # noqa: E402
from evalkit.filters.sample import SampleConfig, SampleFilter  # noqa: E402
from evalkit.filters.sql import SqlConfig, SqlFilter  # noqa: E402
from evalkit.judges.failure_mode import FailureModeConfig, FailureModeJudge  # noqa: E402
from evalkit.judges.prompt_echo import PromptEchoConfig, PromptEchoJudge  # noqa: E402
from evalkit.judges.regex import RegexConfig, RegexJudge  # noqa: E402
from evalkit.judges.tool_success_mismatch import ToolSuccessMismatchJudge  # noqa: E402
from evalkit.results.schemas import RECORDS, conform  # noqa: E402
from evalkit.sources.jsonl import JsonlSource, JsonlSourceConfig  # noqa: E402

BATCH = 50_000


def load(n: int, tmp: Path) -> pa.Table:
    path = tmp / "big.jsonl"
    make_data.write(str(path), n, seed=11, numbered=True)
    ctx = RunContext("bench", "bench", tmp, tmp, tmp)
    cfg = JsonlSourceConfig(path=str(path), record_id="id", batch_size=BATCH,
                            fields={"input_tokens": "usage.input",
                                    "output_tokens": "usage.output", "cost_usd": "cost.total"})
    return pa.concat_tables(conform(b, RECORDS) for b in JsonlSource("s", cfg, ctx).read()
                            if isinstance(b, pa.Table))  # (not its rejects)


def timed(name: str, table: pa.Table, fn) -> None:
    t0 = time.perf_counter()
    for start in range(0, table.num_rows, BATCH):
        fn(table.slice(start, BATCH))
    dt = time.perf_counter() - t0
    print(f"{name:28s} {table.num_rows / dt:>12,.0f} records/s  ({dt:.2f} s)")


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = load(n, Path(tmp))
    print(f"{table.num_rows} records, batches of {BATCH}")

    def batch(t: pa.Table) -> pa.RecordBatch:
        return t.combine_chunks().to_batches()[0]

    pf = PipelineFailureFilter("pf", PipelineFailureConfig(), None)
    timed("filter pipeline_failure", table, lambda t: pf.mark(batch(t)))
    marks = pa.concat_arrays([pf.mark(batch(table.slice(s, BATCH)))
                              for s in range(0, table.num_rows, BATCH)])
    included = table.filter(pc.is_null(marks))
    print(f"  marked {table.num_rows - included.num_rows} of {table.num_rows} as failures")
    for name, plugin in [("filter level", LevelFilter("l", LevelConfig(), None)),
                         ("filter sql", SqlFilter("s", SqlConfig(where="latency_s > 5"), None)),
                         ("filter sample", SampleFilter("s", SampleConfig(fraction=0.1),
                                                        None))]:
        timed(name, table, lambda t, p=plugin: p.mark(batch(t)))
    echo = PromptEchoJudge("e", PromptEchoConfig(), None)
    timed("judge prompt_echo (included)", included, echo.judge)
    # each record has its own case number; the same prompts and outputs without it repeat
    # (nine prompts): the case prompt_echo's one comparison per distinct pair is made for
    repeated = included
    for col in ("input", "output"):
        repeated = repeated.set_column(
            repeated.schema.get_field_index(col), col,
            pc.replace_substring_regex(repeated.column(col), r"Case \d+[.:] ", ""))
    timed("judge prompt_echo (repeated)", repeated, echo.judge)
    for name, judge in [
        ("judge regex", RegexJudge("r", RegexConfig(pattern="(?i)sorry"), None)),
        ("judge tool_success_mismatch",
         ToolSuccessMismatchJudge("t", ToolSuccessMismatchConfig(), None)),
        ("judge failure_mode (all)", FailureModeJudge("f", FailureModeConfig(), None)),
    ]:
        timed(name, table if "all" in name else included, judge.judge)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
