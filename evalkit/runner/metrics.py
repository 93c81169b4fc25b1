"""Computing a run's metrics once its records and judgments are written."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from evalkit._faults import point
from evalkit.config import PluginInstance
from evalkit.context import RunContext
from evalkit.plugin import Metric
from evalkit.results.schemas import METRICS, conform
from evalkit.results.writer import run_connection

__all__ = ["compute_metrics"]


def compute_metrics(plugins: list[tuple[PluginInstance, Metric]], ctx: RunContext,
                    timings: dict[str, float]) -> list[pa.Table]:
    """Each metric's rows, in config order. When every metric is ``thread_safe`` (the
    built-in ones: they read the run through the connection they are given and keep no other
    state), they are computed on a thread per core, each thread with its own DuckDB cursor:
    DuckDB and numpy leave the interpreter free, so the second core, idle once the records
    are written, takes half the work. Metrics of the same ``cursor_group()`` (a rate and a
    mean of one judge and slices) share a thread and a cursor, hence one judged table."""
    con = run_connection(ctx.run_dir)
    try:
        def compute(inst: PluginInstance, plugin: Metric, cursor: Any) -> pa.Table:
            t1 = time.perf_counter()
            fill = {"run_id": ctx.run_id, "plugin": inst.plugin, "metric": inst.name,
                    "higher_is_better": plugin.higher_is_better}
            table = conform(plugin.compute(cursor), METRICS, fill)
            timings[f"metric.{inst.name}"] = time.perf_counter() - t1
            point("metric_computed")
            return table

        cores = os.cpu_count() or 1
        if cores < 2 or len(plugins) < 2 or \
                not all(plugin.thread_safe for _, plugin in plugins):
            return [compute(inst, plugin, con) for inst, plugin in plugins]
        groups: dict[Any, list[int]] = {}
        for k, (_, plugin) in enumerate(plugins):
            key = plugin.cursor_group()
            groups.setdefault(("own", k) if key is None else ("group", key), []).append(k)
        out: list[pa.Table | None] = [None] * len(plugins)

        def compute_group(members: list[int]) -> None:
            cursor = con.cursor()
            try:
                for k in members:
                    out[k] = compute(*plugins[k], cursor)
            finally:
                cursor.close()

        with ThreadPoolExecutor(min(cores, len(groups)),
                                thread_name_prefix="evalkit-metrics") as pool:
            for future in [pool.submit(compute_group, g) for g in groups.values()]:
                future.result()
        return [table for table in out if table is not None]
    finally:
        con.close()


