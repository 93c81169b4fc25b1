"""The public API for plugin authors: the six plugin contracts, what the runner hands a plugin
and what it expects back, and helpers to build judgments. A plugin imports from here only
(``from evalkit.plugin import Judge, verdicts``); everything else in evalkit may change.

A plugin is a class registered under an entry point group (``evalkit.sources``,
``evalkit.filters``, ``evalkit.generators``, ``evalkit.judges``, ``evalkit.metrics``,
``evalkit.sinks``) that
subclasses the contract of its kind below and sets ``Config``, a frozen dataclass (one short
comment per field; the instance's YAML, minus its ``plugin:`` key, is validated against it
before anything runs, and its ``validate()`` method, if any, raises ``ValueError("key:
problem")``). Every capability the runner relies on is declared on the contract with its
default; a plugin overrides what it needs. :func:`check_plugin` runs when the plugin loads
and names the plugin and what to fix when it does not honour its contract.

Heavy imports belong inside the plugin's methods (or a module they import), so that
discovering and validating plugins stays cheap. The guide: ``docs/plugin-authoring.md``.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from evalkit.context import RunContext
from evalkit.judges._det import strip_code_fence, verdicts
from evalkit.results.sandbox import ConfigSql
from evalkit.results.schemas import JUDGMENTS, METRICS, RAW_LIMIT, RECORDS, conform

if TYPE_CHECKING:
    import duckdb

    from evalkit.judges.llm import _prompt as prompts
    from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
    from evalkit.judges.llm._parse import ParseError, choice, number, parse_json_object, require

__all__ = [
    "JUDGMENTS", "METRICS", "RECORDS", "AsyncJudge", "Call", "ConfigSql", "Filter",
    "Generator", "ImportedScores",
    "Judge", "JudgeResult", "LlmJudge", "LlmJudgeConfig", "Metric", "ParseError", "Produces",
    "Reject", "RunContext", "Sink", "Source", "SourceItem", "accounting",
    "check_plugin", "choice", "conform", "failed", "number", "parse_json_object",
    "plugin_class", "prompts", "require", "strip_code_fence", "verdicts",
]

JudgeResult = pa.Table | list[dict[str, Any]]
"""What a judge returns: a table (or rows) of :data:`JUDGMENTS` columns, at least
``record_id`` and ``status``, exactly one row per record it was given."""


class _Plugin:
    """What every plugin has: ``Config`` and the constructor the runner calls."""

    Config: ClassVar[type]

    def __init__(self, name: str, config: Any, ctx: RunContext | None) -> None:
        """``name`` is the instance name (the YAML key), ``config`` an instance of
        ``Config``, ``ctx`` the run the plugin works for (``None`` for a sink called by
        ``evalkit push``)."""
        self.name = name
        self.config = config
        self.ctx = ctx


@dataclass(frozen=True)
class Reject:
    """Input that could not become a record, as a source yields it: the run writes it to the
    ``rejects`` table (with the source's name) and goes on."""

    location: str  # where the input was: file:line, a page, an id
    reason: str  # why it is not a record, and the fix when there is one
    raw: str | None = None  # the input (not a str: its repr), cut to RAW_LIMIT characters

    def __post_init__(self) -> None:
        raw = self.raw
        if raw is not None and not isinstance(raw, str):
            raw = repr(raw)
        if raw is not None and len(raw) > RAW_LIMIT:
            raw = raw[:RAW_LIMIT] + f"… [{len(raw) - RAW_LIMIT} more characters]"
        object.__setattr__(self, "raw", raw)


@dataclass(frozen=True)
class ImportedScores:
    """Scores the input already carries (another system's judge), as a source yields them:
    kept as judgments with ``origin='imported'``, so they are audited like evalkit's own.
    Build it with :meth:`of`."""

    table: pa.Table  # JUDGMENTS columns; run_id is filled in by the runner

    @classmethod
    def of(cls, data: pa.Table | Iterable[Mapping[str, Any]]) -> ImportedScores:
        """From rows (or a table) with ``record_id``, ``judge`` and a ``value`` or
        ``label`` (and any other :data:`JUDGMENTS` column)."""
        return cls(conform(data, JUDGMENTS, {"origin": "imported", "status": "ok",
                                              "plugin": "imported"}))


SourceItem = pa.Table | pa.RecordBatch | Reject | ImportedScores
"""What :meth:`Source.read` yields."""


class Source(_Plugin):
    """Reads the input. :meth:`read` yields what it reads, in input order:

    - record batches: tables (or record batches) holding any subset of the :data:`RECORDS`
      columns; missing ones become null and ``run_id`` is set by the runner. ``record_id``
      must be stable across runs of the same input;
    - a :class:`Reject` for input that cannot become a record (never raised, never dropped);
    - :class:`ImportedScores` for scores the input carries, yielded before the batch that
      holds their records (the runner writes them with that batch's judgments; a source
      cut short by ``source.limit`` loses the scores of the records cut off).
    """

    parses_beside: bool = False
    """True once :meth:`read` has started when the source parses its input on worker
    processes: the run's thread is then free, and judges that are ``thread_safe`` judge one
    batch on a thread while the run takes the next."""

    def read(self) -> Iterator[SourceItem]:
        """Yield record batches, rejects and imported scores until the input is exhausted."""
        raise NotImplementedError

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this input (paths, sizes, hashes, a server and time window), for
        the manifest."""
        return {}

    def shard(self, index: int, count: int) -> bool:
        """``source.shard=index/count``, called before :meth:`read`: True when the source reads
        only that shard of its input itself (Langfuse: its slice of the time window, so the
        shards do not each fetch everything), and then every record, reject and imported
        score it yields belongs to the shard, each in exactly one shard of ``count``, the
        same on every machine. False (the default) leaves the cut to the runner: it keeps
        what hashes to the shard by ``record_id``. Raise :class:`evalkit.errors.ConfigError`
        when this config cannot be cut so."""
        return False


class Filter(_Plugin):
    """Marks records to set aside. Filters never drop: a marked record stays in ``records``
    with ``excluded_by`` (the first filter that marked it) and ``exclude_reason``."""

    def mark(self, batch: pa.RecordBatch) -> pa.Array | list[str | None]:
        """One string per row of ``batch``: the reason to exclude it, or null to keep it."""
        raise NotImplementedError


class Judge(_Plugin):
    """Scores records, a whole batch at a time (deterministic judges; an LLM judge is an
    :class:`AsyncJudge`).

    The one rule of the result: **exactly one judgment per record given**, with that
    record's ``record_id`` (in any order: the runner writes each judge's judgments of a
    batch in record order, which lets metrics line them up with the records by position).
    A result that breaks the rule (a record without a judgment, one twice, or a record it
    was not given) costs the judge the batch: every record of it gets an error judgment
    naming the breach, as when ``judge`` raises. ``run_id``, ``judge``, ``plugin``,
    ``origin`` and ``judge_model`` are filled in by the runner when absent. A record the
    judge could not score is a row with ``status='error'`` and a null ``value``, never a
    default score; one it does not apply to, ``status='skipped'`` with the reason."""

    thread_safe: ClassVar[bool] = False
    """``judge`` may run on another thread than the one that built the judge (it keeps no
    thread-bound resource, such as a sqlite connection)."""

    applies_to_excluded: ClassVar[bool] = False
    """The judge sees the records a filter (or the generate stage) set aside too; otherwise
    the runner writes a ``status='skipped'`` judgment for each of them. A record the source
    set aside (an OTLP agent or tool span, a transcript's compaction turn: no output of the
    system) is skipped by every judge."""

    judge_model: str | None = None
    """The model behind the verdicts (an LLM judge's), for the judgments' ``judge_model``."""

    def wanted_columns(self) -> list[str] | tuple[str, ...] | None:
        """The record columns the judge reads (``record_id`` is always given), or ``None``
        for every column. When every judge of a run names its columns, only those are
        copied for the included records."""
        return None

    def judge(self, records: pa.Table) -> JudgeResult:
        """The judgments of ``records``: one per record (see the class docstring)."""
        raise NotImplementedError

    def estimate(self, records: pa.Table) -> dict[str, Any]:
        """What judging ``records`` would cost, for ``runner.dry_run``: ``calls``,
        ``input_tokens``, ``cost_usd`` (null when unknown). No model is called."""
        return {"calls": 0}

    def close(self) -> None:
        """Release what the judge holds (connections, files) once the run is done."""

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """What the endpoints the judge called said about their limits, by endpoint (an LLM
        judge: the rate and calls in flight its adaptive limits settled at, refusals), for
        the run's manifest (``endpoints``) and summary. Called once the run is judged."""
        return {}


class AsyncJudge(Judge):
    """A judge whose work waits on the network (an LLM judge): the runner awaits
    :meth:`ajudge` for every such judge of a batch concurrently, instead of calling
    ``judge``. Same rule: exactly one judgment per record given."""

    async def ajudge(self, records: pa.Table) -> JudgeResult:
        """The judgments of ``records``: one per record."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Produces:
    """What a metric instance writes, known from its config before the run: alerts are
    checked against it before anything runs, so an alert on a name or slice the run cannot
    produce is a config error instead of an alert that never fires."""

    names: tuple[str, ...]
    """The metric names it writes (``echo_rate``, ``echo_rate.raw``, ``latency.p95``)."""

    prefixes: tuple[str, ...] = ()
    """And any name starting with one of these (a category the data decides: ``modes.``)."""

    slice_by: tuple[str, ...] | None = ()
    """The record columns its slices are cut by: slices are ``all`` and ``<column>=<value>``
    (``None``: any slice; a metric that cannot say)."""


class Metric(_Plugin):
    """Summarises a run. :meth:`compute` gets a DuckDB connection with the run's ``records``,
    ``judgments`` (and ``included``: records not excluded) as views and returns metric rows
    (columns of :data:`METRICS`; ``metric`` defaults to the instance name, ``run_id``,
    ``plugin`` and ``higher_is_better`` are filled in by the runner).

    A computed judge's judgments of each batch are written in the batch's record order, one
    per record; imported scores follow their records' batch. A metric may rely on that order
    only after checking it (``metrics._judged`` does, by a count), never blindly."""

    higher_is_better: ClassVar[bool | None] = None
    """Whether a larger value is better (``None``: neither, e.g. a count)."""

    thread_safe: ClassVar[bool] = False
    """``compute`` may run on another thread beside other metrics, with a cursor of its own
    (it keeps no state outside the instance and the connection it is given). A run whose
    metrics all say so computes them on a thread per core."""

    def compute(self, con: duckdb.DuckDBPyConnection) -> pa.Table | list[dict[str, Any]]:
        """The metric rows for this run, one per slice (and statistic)."""
        raise NotImplementedError

    def produces(self) -> Produces | None:
        """The metric names and slices this instance writes (see :class:`Produces`).
        ``None`` (the default) leaves it to the runner: the instance name and any name under
        it (``name.<anything>``), sliced by ``config.slice_by`` when the config has that
        field, else in any slice. Override it to name your statistics exactly, so that a
        misspelt alert on one of them is caught before the run."""
        return None

    def cursor_group(self) -> Hashable | None:
        """A key: the ``thread_safe`` metrics of a run that give the same key are computed
        one after the other on one thread and cursor, so they can share what they load
        through it (``mean`` and ``rate`` of one judge and slices share one judged table).
        ``None``: a cursor of its own."""
        return None


class Sink(_Plugin):
    """Sends a finished run somewhere else (Langfuse scores, a warehouse). Used by ``evalkit
    push RUN --to NAME`` and, for the sinks under ``sinks:`` in a config, at the end of every
    run."""

    def push(self, run_dir: Path) -> dict[str, Any]:
        """Send the run in ``run_dir``; return a JSON-able report of what was sent, skipped
        and failed, with reasons (``failed``: a count, which the runner reports when not 0).
        The runner adds it to the manifest under ``sinks``."""
        raise NotImplementedError


class Generator(_Plugin):
    """Makes a second, candidate output for records (shadow evaluation: the recorded inputs
    replayed through another model or prompt). The runner calls :meth:`agenerate` once per
    batch, after the filters, with the records to replay; each candidate becomes a record of
    its own beside the recorded one (``side='candidate'``, ``record_id`` + ``::candidate``),
    goes through the same filters and is judged like any record.

    The rows returned: exactly one per record given, with ``record_id`` and ``output`` (the
    candidate's text, ``None`` when it failed), and when known ``model``, ``latency_s``,
    ``cost_usd``, ``input_tokens``, ``output_tokens``, ``error`` (why there is no output:
    the candidate record is then set aside with that reason, never judged) and ``details``
    (kept in the candidate record's metadata)."""

    async def agenerate(self, records: pa.Table) -> list[dict[str, Any]]:
        """One candidate per record of ``records`` (every :data:`RECORDS` column)."""
        raise NotImplementedError

    def estimate(self, records: pa.Table) -> dict[str, Any]:
        """For a dry run: the ``calls``, ``cached_calls``, ``input_tokens``,
        ``output_tokens`` and ``cost_usd`` :meth:`agenerate` would spend on ``records``,
        without calling anything. The default: nothing."""
        return {"calls": 0, "cached_calls": 0, "input_tokens": 0, "output_tokens": 0,
                "cost_usd": 0.0}

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """What the endpoints the generator called said about their limits, by endpoint,
        as :meth:`Judge.endpoint_stats` (the run's manifest ``endpoints`` and summary).
        Called once the run is judged; the default: nothing."""
        return {}

    def close(self) -> None:
        """Release what the generator holds (connections); called once after the run."""


CONTRACTS: dict[str, type] = {"sources": Source, "filters": Filter, "judges": Judge,
                              "metrics": Metric, "sinks": Sink, "generators": Generator}
"""The contract of each plugin kind (entry point group ``evalkit.<kind>``)."""

_METHODS = {"sources": "read", "filters": "mark", "judges": "judge", "metrics": "compute",
            "sinks": "push", "generators": "agenerate"}
_FLAGS = {"thread_safe": (bool,), "applies_to_excluded": (bool,),
          "higher_is_better": (bool, type(None))}


def check_plugin(kind: str, cls: object) -> str | None:
    """What keeps ``cls`` from honouring the ``kind`` contract, as "problem; fix" (``None``
    when it does): it must subclass the contract, set a frozen dataclass ``Config``,
    implement the method(s) of its kind, give declared capabilities values of the right
    type, and not misspell one (an attribute one letter off ``thread_safe`` would silently
    keep the default)."""
    contract = CONTRACTS[kind]
    fix = f"from evalkit.plugin import {contract.__name__}"
    if not inspect.isclass(cls):
        return f"is a {type(cls).__name__}, not a class; register the plugin class"
    if not issubclass(cls, contract):
        return (f"does not subclass evalkit.plugin.{contract.__name__}; declare it as "
                f"`class {cls.__name__}({contract.__name__})` ({fix})")
    config = getattr(cls, "Config", None)
    if config is None:
        return "has no Config; set `Config = <a @dataclass(frozen=True) class>` on the class"
    if not (inspect.isclass(config) and dataclasses.is_dataclass(config)):
        return f"Config is {config!r}, not a dataclass; decorate it @dataclass(frozen=True)"
    if not config.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        return f"Config {config.__name__} is not frozen; decorate it @dataclass(frozen=True)"
    if kind == "judges" and issubclass(cls, AsyncJudge):
        contract = AsyncJudge
        if not inspect.iscoroutinefunction(cls.ajudge):
            return "ajudge is not a coroutine function; define it `async def ajudge`"
    elif kind == "judges" and "ajudge" in dir(cls):
        return ("defines ajudge() but subclasses Judge; subclass AsyncJudge for an async "
                "judge (from evalkit.plugin import AsyncJudge)")
    method = "ajudge" if contract is AsyncJudge else _METHODS[kind]
    if getattr(cls, method) is getattr(contract, method):
        return f"does not implement {method}(); see evalkit.plugin.{contract.__name__}"
    for flag, types in _FLAGS.items():
        if hasattr(contract, flag) and not isinstance(getattr(cls, flag), types):
            allowed = " or ".join("None" if t is type(None) else t.__name__ for t in types)
            return f"{flag} is {getattr(cls, flag)!r}; it must be {allowed}"
    declared = [n for n in dir(contract) if not n.startswith("_")]
    own = {n for k in cls.__mro__ if k not in contract.__mro__ for n in vars(k)
           if not n.startswith("_")}
    for name in sorted(own - set(declared)):
        close = difflib.get_close_matches(name, declared, n=1, cutoff=0.85)
        if close:
            return (f"defines '{name}', which is not part of the {contract.__name__} "
                    f"contract; did you mean '{close[0]}'?")
    return None


def plugin_class(kind: str, name: str) -> type:
    """The class of the installed plugin ``name`` of ``kind`` (``sources``, ``filters``,
    ``judges``, ``metrics``, ``sinks``), found and checked as a config naming it would be.
    A plugin that builds on another plugin gets it here, never by importing its module."""
    from evalkit.registry import registry

    return registry().get(kind, name)


# The helpers of LLM judges, imported on first use: a deterministic plugin that imports this
# module does not pay for the judge engine.
_LLM = {
    "LlmJudge": ("evalkit.judges.llm._base", "LlmJudge"),
    "LlmJudgeConfig": ("evalkit.judges.llm._base", "LlmJudgeConfig"),
    "Call": ("evalkit.judges.llm._base", "Call"),
    "accounting": ("evalkit.judges.llm._base", "accounting"),
    "failed": ("evalkit.judges.llm._base", "failed"),
    "ParseError": ("evalkit.judges.llm._parse", "ParseError"),
    "choice": ("evalkit.judges.llm._parse", "choice"),
    "number": ("evalkit.judges.llm._parse", "number"),
    "parse_json_object": ("evalkit.judges.llm._parse", "parse_json_object"),
    "require": ("evalkit.judges.llm._parse", "require"),
    "prompts": ("evalkit.judges.llm._prompt", None),
}


def __getattr__(name: str) -> Any:
    if name not in _LLM:
        raise AttributeError(f"module 'evalkit.plugin' has no attribute '{name}'")
    import importlib

    module, attr = _LLM[name]
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)
