"""A sweep (``evalkit run -m ...``) on any of Hydra's launchers: each job is one run with its
own run directory, stamped with the sweep's id and its job number (``runs.sweep_id``,
``runs.sweep_job``). A job that fails is noted and the others go on; when the launcher is
done, the launching process prints one table of every job's headline metrics and exits with
the highest exit code of its jobs (0 when all succeeded).

The launching process creates the sweep's id and a status file and hands both to the jobs
through the environment, which every launcher's worker processes inherit (joblib's loky
workers, submitit's local processes). Each job appends two short JSON lines to the file
(``O_APPEND``: one ``write`` of under ``PIPE_BUF`` bytes, atomic on a local file system): one
when it starts, one when it ends; a job that started and never ended (its process died) is
reported as failed."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "JOB_ENV", "LIMITS_DIR", "MAX_METRICS", "SWEEP_ID", "SWEEP_STATUS", "current_job", "finish",
    "is_multirun", "job_env", "jobs", "note", "planned", "start",
]

SWEEP_ID = "EVALKIT_SWEEP_ID"
SWEEP_STATUS = "EVALKIT_SWEEP_STATUS"
# the judges' limits shared by the sweep's processes (evalkit/judges/llm/_sharedlimit.py)
LIMITS_DIR = "EVALKIT_LIMITS_DIR"
_OWN_LIMITS = "EVALKIT_SWEEP_OWN_LIMITS"  # the limits directory this sweep made (and removes)
_MAX_LINE = 3800  # (under PIPE_BUF, 4096: one atomic append)
MAX_METRICS = 6  # metric columns in the closing table; the rest are in the runs' tables


def is_multirun(argv: list[str]) -> bool:
    return any(a in ("-m", "--multirun") for a in argv) or any(
        a.replace(" ", "") in ("hydra.mode=MULTIRUN", "hydra.mode=multirun") for a in argv)


def start() -> Path:
    """In the launching process: a new sweep id and status file, in the environment."""
    from evalkit.runner.run import new_run_id

    os.environ[SWEEP_ID] = new_run_id()
    fd, path = tempfile.mkstemp(prefix="evalkit-sweep-status-", suffix=".jsonl")
    os.close(fd)
    os.environ[SWEEP_STATUS] = path
    if not os.environ.get(LIMITS_DIR):  # (set by the user: limits shared beyond this sweep)
        os.environ[LIMITS_DIR] = tempfile.mkdtemp(prefix="evalkit-sweep-limits-")
        os.environ[_OWN_LIMITS] = os.environ[LIMITS_DIR]
    return Path(path)


def current_job() -> dict[str, Any] | None:
    """In a job: ``{"id": sweep id, "job": job number}`` when it runs as part of a sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return None
    return {"id": os.environ.get(SWEEP_ID), "job": int(hc.job.num)}


def note(event: dict[str, Any]) -> dict[str, Any]:
    """In a job: one line of the sweep's status file (nothing outside a sweep); returns
    ``event`` (a job returns its end to the launcher: the Ray launcher notes it again on the
    launching machine, for a job that ran on another node)."""
    path = os.environ.get(SWEEP_STATUS)
    if not path:
        return event
    line = json.dumps(event, default=str)
    if len(line) > _MAX_LINE:
        event = {**event, "error": str(event.get("error", ""))[:1000] + " …"}
        line = json.dumps(event, default=str)[:_MAX_LINE]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    return event


# the variables a job reads from the launching shell, handed to launchers whose workers do
# not inherit it (Ray): evalkit's own (the sweep's, secret command-line values, the cache...),
# litellm's, Langfuse's, OpenTelemetry's, AWS's (an s3:// runs_dir); every secret-named one
# (the providers' API keys litellm reads); those the config names (``api_key_env`` and any
# ``*_env`` key, and ``${oc.env:NAME}``); and those listed in EVALKIT_JOB_ENV (names,
# comma-separated)
_JOB_ENV_PREFIXES = ("EVALKIT_", "LITELLM_", "LANGFUSE_", "OTEL_", "AWS_")
JOB_ENV = "EVALKIT_JOB_ENV"


def job_env(config: Any = None) -> dict[str, str]:
    """The launching process's variables a job of ``config`` (a job's composed config)
    reads; see ``_JOB_ENV_PREFIXES``."""
    import re

    from evalkit.redact import is_secret_name

    named = set(os.environ.get(JOB_ENV, "").replace(",", " ").split())
    if config is not None:
        from omegaconf import OmegaConf

        tree = OmegaConf.to_container(config, resolve=False)
        stack: list[Any] = [tree]
        while stack:
            node = stack.pop()
            items = node.items() if isinstance(node, dict) else enumerate(node) \
                if isinstance(node, list) else ()
            for key, value in items:
                if isinstance(value, (dict, list)):
                    stack.append(value)
                elif isinstance(value, str):
                    if str(key).endswith("_env") and re.fullmatch(r"[A-Za-z_]\w*", value):
                        named.add(value)
                    named.update(re.findall(r"\$\{oc\.env:([A-Za-z_]\w*)", value))
    return {k: v for k, v in os.environ.items()
            if k in named or k.startswith(_JOB_ENV_PREFIXES) or is_secret_name(k)}


def planned(argv: list[str]) -> list[list[str]] | None:
    """The overrides of each job the default (basic) sweeper makes of ``argv``, by job
    number; None when another sweeper decides (or the line does not parse)."""
    overrides = [a for a in argv if not a.startswith("-")]
    task = [a for a in overrides if not a.lstrip("+~").startswith(("hydra.", "hydra/"))]
    if any(a.lstrip("+~").startswith("hydra/sweeper=") or a.startswith("hydra.sweeper.")
           for a in overrides):
        return None
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(task)
        return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    except Exception:  # (Hydra itself says what is wrong with the line)
        return None


def jobs(path: Path, plan: list[list[str]] | None = None) -> list[dict[str, Any]]:
    """Each job's last word, by job number: started and never ended -> failed (exit 1),
    naming the run it left; in ``plan`` and never started -> not run (exit 1)."""
    out: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        num = int(event["job"])
        if event.get("event") == "start":
            out.setdefault(num, {**event, "status": "failed", "exit": 1,
                                 "error": "the job's process ended before the job did"})
        else:
            out[num] = {**out.get(num, {}), **event}
    for job in out.values():
        run = job.get("run_dir")
        if job.get("event") != "run":
            continue
        if run and (Path(run) / "manifest.json").exists():
            name = Path(run).name
            job["error"] += (f"; its run {name} is left unfinished: finish it with: "
                             f"evalkit run ... --resume {name}")
        else:
            job["run_dir"] = None  # it died before its run wrote anything
    for num, overrides in enumerate((plan or []) if out else []):  # (none started: Hydra said)
        out.setdefault(num, {"job": num, "overrides": overrides, "status": "not run",
                             "exit": 1, "run_dir": None,
                             "error": "never started: the launcher stopped before it (its "
                                      "error is above)"})
    return [out[k] for k in sorted(out)]


def _cell(head: tuple[str, str] | None, with_ci: bool) -> str:
    if head is None:
        return "—"
    return head[0] + (f" {head[1]}" if with_ci and head[1] else "")


def _fit(width: int, base: list[tuple[str, list[str]]], names: list[str],
         heads: list[dict[str, tuple[str, str]]], runs: list[str], keep_first: bool = False
         ) -> tuple[list[str], set[str], bool]:
    """The metric columns, those shown with their intervals, and whether with the run id,
    that make the closing table fit ``width`` columns: every metric (up to MAX_METRICS)
    with its interval and the run id if they fit, then without intervals, then without the
    run id (each job's line names its run), then fewer metrics; at least one.
    ``keep_first``: the first metric (a ranking's) keeps its interval throughout."""
    def natural(cols: list[list[str]]) -> int:
        return sum(max(len(c) for c in col) for col in cols) + 3 * len(cols) + 1

    cols = [[head, *cells] for head, cells in base]
    label_width = max(len(c) for c in dict(base)["overrides"] + ["overrides"])
    fixed = natural(cols) - max(label_width - 24, 0)  # long labels fold to 24 columns
    most = min(len(names), MAX_METRICS)
    tries = [(most, True, True), (most, False, True), (most, False, False)] + \
        [(k, False, False) for k in range(most - 1, 0, -1)]
    for k, with_ci, with_run in tries:
        ci = set(names[:k]) if with_ci else set(names[:1]) if keep_first else set()
        extra = [["run id", *runs]] if with_run else []
        metric_cols = [[n, *(_cell(h.get(n), n in ci) for h in heads)] for n in names[:k]]
        if fixed + natural(extra + metric_cols) - 1 <= width:
            return names[:k], ci, with_run
    return names[:1], set(names[:1]) if keep_first else set(), False


def _headline(run_dir: str | None, side: str | None = None) -> dict[str, tuple[str, str]]:
    """metric -> ("value", "[low, high]") for the run's slice='all' rows; with ``side``, the
    rows of slice ``side=SIDE`` instead wherever the metric is sliced by side."""
    if not run_dir or not (Path(run_dir) / "metrics.parquet").exists():
        return {}
    import pyarrow.parquet as pq

    from evalkit.runner.summary import _num

    out: dict[str, tuple[str, str]] = {}
    sided: set[str] = set()
    for r in pq.read_table(Path(run_dir) / "metrics.parquet",
                           columns=["metric", "slice", "value", "ci_low", "ci_high"]).to_pylist():
        mine = side is not None and r["slice"] == f"side={side}"
        if (r["slice"] != "all" and not mine) or (r["metric"] in sided and not mine) or \
                r["metric"].endswith((".raw", ".filter_effect")):
            continue
        if mine:
            sided.add(r["metric"])
        out[r["metric"]] = (_num(r["value"]), _interval(r["ci_low"], r["ci_high"]))
    return out


def _interval(low: float | None, high: float | None) -> str:
    from evalkit.runner.summary import _num

    return f"[{_num(low)}, {_num(high)}]" if low is not None else ""


def _ranking(done: list[dict[str, Any]]) -> tuple[Any, str | None]:
    """The ranking of the jobs' runs (:func:`evalkit.comparison.rank_sweep`), or why none:
    the one the sweep's page (``runner.report=true``) showed, when it ranked these runs."""
    from evalkit.comparison.ranking import rank_sweep
    from evalkit.errors import EvalkitError
    from evalkit.report._sweep import shown_ranking

    dirs = [Path(j["run_dir"]) for j in done if j.get("status") == "ok" and j.get("run_dir")
            and (Path(j["run_dir"]) / "manifest.json").exists()]
    shown = shown_ranking(dirs)
    if shown is not None:
        return shown, None
    try:
        return rank_sweep(dirs), None
    except (EvalkitError, OSError, ValueError) as exc:
        return None, f"not ranked: {exc}"


_STARTING_S = 120.0  # how long a job may take to start its run before we stop waiting


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return bool(state) and state[0] not in ("Z", "X")  # (a zombie has ended)
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _writing(run_dir: str) -> bool | None:
    """Whether a process holds the run's lock (None: no lock file to tell)."""
    import fcntl

    from evalkit.results.runs import LOCK

    try:
        fd = os.open(Path(run_dir) / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _running_here(path: Path, waited_s: float) -> list[int]:
    """The jobs that started on this machine, have not ended and are still at it: their run
    is locked by its writer, or (no run yet, for at most ``_STARTING_S``) their process
    lives. A worker process that outlives its job (joblib's, Ray's) is not waited for."""
    import socket

    host = socket.gethostname()
    out = []
    for job in jobs(path):
        pid = job.get("pid")
        if job.get("event") not in ("start", "run") or job.get("host") != host or not pid:
            continue
        writing = _writing(job["run_dir"]) if job.get("run_dir") else None
        if writing or (writing is None and waited_s < _STARTING_S and _alive(int(pid))):
            out.append(int(job["job"]))
    return out


def _wait_for_jobs(path: Path, limit_s: float) -> None:
    """Wait for the jobs still running when the launcher returned (Hydra's submitit
    launcher returns at the first job that died; the jobs after it run on). Ctrl-C stops
    waiting."""
    import time

    said = False
    t0 = time.monotonic()
    try:
        while (running := _running_here(path, time.monotonic() - t0)) and \
                time.monotonic() - t0 < limit_s:
            if not said:
                names = ", ".join(str(j) for j in running)
                print(f"evalkit: the launcher stopped; waiting for job {names} still running "
                      "(Ctrl-C to stop waiting)", file=sys.stderr, flush=True)
                said = True
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass


def finish(path: Path, plan: list[list[str]] | None = None,
           wait_s: float = float("inf")) -> int:
    """In the launching process, after the launcher returned: the closing table (every job
    of ``plan``, the jobs the sweeper made, started or not); the exit code (the highest of
    the jobs'). First it waits, up to ``wait_s``, for the jobs on this machine still
    running (after a Ctrl-C, which they got too, for them to mark their runs)."""
    if wait_s > 0 and path.exists():
        _wait_for_jobs(path, wait_s)
    os.environ.pop(SWEEP_STATUS, None)
    sweep_id = os.environ.pop(SWEEP_ID, None)
    from evalkit.report._sweep import ENV as REPORT_LIST

    left = os.environ.pop(REPORT_LIST, None)  # a sweep that stopped before its report
    if left:
        Path(left).unlink(missing_ok=True)
    own = os.environ.pop(_OWN_LIMITS, None)
    if own:
        import shutil

        os.environ.pop(LIMITS_DIR, None)
        shutil.rmtree(own, ignore_errors=True)
    if not path.exists():
        return 0
    done = jobs(path, plan)
    path.unlink()
    if not done:
        return 0
    from rich.console import Console
    from rich.table import Table

    from evalkit.redact import mask
    from evalkit.safetext import markup as escape  # every text from data goes through it

    console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120)
    from evalkit.run_names import names_by_overrides

    ranking, unranked = _ranking(done)
    side = ranking.side if ranking else None
    entries: list[Any] = [None] * len(done)  # each job's place in the ranking (a RankedRun)
    if ranking is not None:  # the jobs best first, the unranked and failed ones after
        rank_of = {str(e.run_dir.resolve()): (k, e) for k, e in enumerate(ranking.runs)}
        found = [rank_of.get(str(Path(j["run_dir"]).resolve())) if j.get("run_dir") else None
                 for j in done]
        placed = sorted(zip(done, found, strict=True), key=lambda p: (
            p[1][0] if p[1] is not None else len(rank_of), int(p[0]["job"])))
        done = [j for j, _ in placed]
        entries = [f[1] if f is not None else None for _, f in placed]
    labels = names_by_overrides([list(j.get("overrides") or []) for j in done],
                                [f"job {j['job']}" for j in done])
    heads = [_headline(j.get("run_dir"), side) for j in done]
    names: list[str] = []
    if ranking is not None:  # the ranked metric first, with the ranking's value and interval
        names.append(ranking.metric)
        from evalkit.runner.summary import _num

        for e, h in zip(entries, heads, strict=True):
            h.pop(ranking.metric, None)
            if e is not None:
                h[ranking.metric] = (_num(e.value), _interval(e.ci_low, e.ci_high))
    for h in heads:
        names += [n for n in h if n not in names]
    failed = [j for j in done if j.get("status") != "ok"]
    statuses = []
    for j in done:
        status = j.get("status", "failed")
        if status not in ("ok", "not run"):
            status = (f"{'interrupted' if j.get('exit') == 130 else 'failed'} "
                      f"(exit {j.get('exit', 1)})")
        statuses.append(status)
    runs = [Path(j["run_dir"]).name if j.get("run_dir") else "—" for j in done]
    ranks = [e.rank if e is not None else "—" for e in entries]
    base = ([("rank", ranks)] if ranking is not None else []) + [
        ("job", [str(j["job"]) for j in done]), ("overrides", labels), ("status", statuses)]
    shown, with_ci, with_run = _fit(console.width, base, names, heads, runs,
                                    keep_first=ranking is not None)
    where = f"side={side}" if side else "slice all"  # (all: a metric not sliced by side)
    table = Table(title=f"sweep {sweep_id} · {len(done)} jobs, {len(failed)} failed · "
                        f"{where}{' · value [95% CI]' if with_ci else ''}",
                  title_justify="left", header_style="bold",
                  caption=escape(ranking.caption()) if ranking is not None else None,
                  caption_justify="left")
    for col, _ in base:
        table.add_column(col, overflow="fold")
    if with_run:
        table.add_column("run id", no_wrap=True)
    for name in shown:
        table.add_column(escape(name), justify="right", no_wrap=True)
    for k, j in enumerate(done):
        status = statuses[k] if statuses[k] == "ok" else f"[bold red]{escape(statuses[k])}[/]"
        cells = [escape(ranks[k])] if ranking is not None else []
        cells += [escape(str(j["job"])), escape(mask(labels[k])), status]
        if with_run:
            cells.append(escape(runs[k]))
        cells += [escape(_cell(heads[k].get(n), n in with_ci)) for n in shown]
        table.add_row(*cells)
    console.print(table)
    if unranked:
        console.print(f"[dim]{escape(mask(unranked))}[/]", soft_wrap=True)
    if len(names) > len(shown):
        more = len(names) - len(shown)
        console.print(f"[dim]{more} more metric{'s' if more > 1 else ''}: evalkit query \"SELECT * "
                      f"FROM metrics JOIN runs USING (run_id) WHERE sweep_id = '{sweep_id}'\"[/]",
                      soft_wrap=True)
    for j in failed:
        word = "not run" if j.get("status") == "not run" else \
            "interrupted" if j.get("exit") == 130 else "failed"
        console.print(f"[bold red]job {j['job']} {word}[/]: {escape(mask(str(j.get('error'))))}",
                      soft_wrap=True)
    return max((int(j.get("exit") or 1) for j in failed), default=0)
