"""From the composed Hydra config to a validated :class:`RunConfig`.

Every plugin instance is checked against its plugin's ``Config`` dataclass before anything
runs; errors name the full key, the bad value and the fix."""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from evalkit.checks import check_one_of, check_unit_interval
from evalkit.errors import ConfigError
from evalkit.redact import mask, mask_override, mask_tree, register_env_resolver, register_tree
from evalkit.registry import registry
from evalkit.results.names import check_name

__all__ = [
    "DEFAULT_FILTER", "OPERATORS", "SEVERITIES", "AlertConfig", "instance", "load",
    "plain_override", "PluginInstance", "RunConfig", "RunnerConfig", "SweepConfig",
    "validate_dataclass",
]

SEVERITIES = ("info", "warning", "error")
OPERATORS = (">", ">=", "<", "<=", "==", "!=")


@dataclass(frozen=True)
class RunnerConfig:
    # where run directories go: a local directory (relative to the working directory) or a
    # URL such as s3://BUCKET/PREFIX (see docs/scaling.md, "Runs on object storage")
    runs_dir: str = "runs"
    run_id: str | None = None  # default: a timestamp plus a random suffix
    resume: str | None = None  # finish this killed, failed or interrupted run (same config)
    batch_size: int = 50_000  # records per batch through filters and judges
    dry_run: bool = False  # count and price judge calls without making any
    fail_on: str | None = None  # exit non-zero when an alert of this severity (or worse) fires
    cache_dir: str | None = None  # judge response cache; default ~/.cache/evalkit
    summary: bool = True  # print the summary table at the end
    summary_slices: bool = False  # show per-slice metric rows in the summary too
    report: bool = False  # write report.html (+ .md, .junit.xml) into the run directory
    report_n_boot: int = 200  # a sweep's page: paired resamples of compare's verdicts (0: none)
    # fail the run (exit 4) when a judge's share of error judgments among the records it
    # judged is above this; null: never
    max_judge_error_rate: float | None = 0.1
    repeats: int = 1  # judge each record this many times (flakiness: the repeatability metric)
    judge_repeats: dict[str, int] = field(default_factory=dict)  # per judge: {NAME: k}
    # a JSON-lines file of records with frozen judgments ('anchor': {JUDGE: {value|passed}}),
    # re-judged every run without the cache: anchor.JUDGE.drift rows, alertable
    anchor: str | None = None
    # a run id or directory: compare this run with it at the end, print the verdicts, write
    # comparison.parquet and flips.parquet, and exit 5 when a gate (gates:) fails
    baseline: str | None = None

    def validate(self) -> None:
        if self.fail_on is not None:
            check_one_of(self.fail_on, SEVERITIES, "fail_on")
        if self.report_n_boot < 0:
            raise ValueError(f"report_n_boot: must be 0 or more, got {self.report_n_boot}")
        if self.max_judge_error_rate is not None:
            check_unit_interval(self.max_judge_error_rate, "max_judge_error_rate")
        for key, k in [("repeats", self.repeats), *(
                (f"judge_repeats.{n}", v) for n, v in self.judge_repeats.items())]:
            if not isinstance(k, int) or k < 1:
                raise ValueError(f"{key}: must be a whole number of at least 1, got {k!r}")


@dataclass(frozen=True)
class AlertConfig:
    metric: str  # metric name as in the metrics table (e.g. echo_rate or latency.p95)
    value: float  # the threshold
    operator: str = ">"  # one of > >= < <= == !=; default: the run's flag_at (> or >=)
    slice: str = "all"  # which slice to watch; "*" watches every slice
    severity: str = "error"  # info, warning or error
    message: str | None = None  # shown in the summary; default says what crossed what
    hints: list[str] = field(default_factory=list)  # remediation hints: printed and stored

    def validate(self) -> None:
        check_one_of(self.operator, OPERATORS, "operator")
        check_one_of(self.severity, SEVERITIES, "severity")


@dataclass(frozen=True)
class SweepConfig:
    """``sweep:``: how a sweep's closing table and report page rank its runs (a shadow
    sweep's candidates): see :func:`evalkit.comparison.rank_runs`."""

    # the metric row to rank by (as in the metrics table: echo_rate, latency.p95); null: in a
    # sweep of shadow runs, the first alert's metric, else the first rate metric; else none
    rank_by: str | None = None
    # which way is better, for a metric that does not say (null: the metric's own)
    higher_is_better: bool | None = None
    correction: str = "holm"  # over the pairs of runs: holm, bh or none
    confidence: float = 0.95  # of the pairwise tests (a run's interval is its metric's own)

    def validate(self) -> None:
        from evalkit.comparison._multiplicity import CORRECTIONS

        check_one_of(self.correction, CORRECTIONS, "correction")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence: {self.confidence} is not within (0, 1)")


@dataclass(frozen=True)
class PluginInstance:
    kind: str  # sources, filters, judges, metrics
    name: str  # the YAML key (the instance name)
    plugin: str  # the registered plugin name
    cls: type
    config: Any  # an instance of cls.Config


@dataclass(frozen=True)
class RunConfig:
    experiment: str
    runner: RunnerConfig
    source: PluginInstance
    filters: list[PluginInstance]
    judges: list[PluginInstance]
    metrics: list[PluginInstance]
    alerts: list[AlertConfig]
    composed: dict[str, Any] = field(repr=False)  # resolved, secrets redacted
    overrides: list[str] = field(default_factory=list)
    sinks: list[PluginInstance] = field(default_factory=list)  # pushed to after the run
    source_limit: int | None = None  # source.limit: read the first N records only
    source_shard: tuple[int, int] | None = None  # source.shard=i/n: the records of shard i
    sweep: dict[str, Any] | None = None  # in a sweep's job: {'id': sweep id, 'job': n}
    gates: list[Any] = field(default_factory=list)  # GateConfig: checked against runner.baseline
    generate: PluginInstance | None = None  # shadow evaluation: a candidate side per record


_TOP_KEYS = ("experiment", "source", "filters", "judges", "metrics", "runner", "alerts",
             "sinks", "flag_at", "gates", "generate", "sweep")


def _gates(node: Any) -> list[Any]:
    """The ``gates:`` list: each an object {metric, tolerance, slice, worse} or the command
    line's form ``METRIC[@SLICE]:[+|-]TOLERANCE``."""
    from evalkit.comparison._gate import GateConfig, parse_gate

    node = node or []
    if not isinstance(node, (list, ListConfig)):
        raise ConfigError("gates: expected a list of {metric, tolerance, slice, worse} or "
                          "'METRIC:+TOLERANCE' strings")
    out = []
    for i, g in enumerate(node):
        if isinstance(g, str):
            try:
                out.append(parse_gate(g))
            except ValueError as exc:
                raise ConfigError(f"gates[{i}]: {str(exc).replace('--gate ', '')}") from None
        else:
            out.append(validate_dataclass(GateConfig, g, f"gates[{i}]", "gate"))
    return out


def _first_line(exc: OmegaConfBaseException) -> str:
    return str(getattr(exc, "msg", exc)).splitlines()[0]


def validate_dataclass(cls: type, node: Any, where: str, what: str) -> Any:
    """``node`` (a mapping) as an instance of dataclass ``cls``; ``where`` is the full key."""
    if not isinstance(node, (dict, DictConfig)):
        raise ConfigError(f"{where}: expected a mapping of {what} keys, got {node!r}")
    allowed = [f.name for f in fields(cls)]
    for key in node:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(
                f"{where}.{key}: unknown key for {what}; {hint}valid keys: {', '.join(allowed)}"
            )
    # a null for a required field (a YAML placeholder) means "not set yet"
    required = {f.name for f in fields(cls) if f.default == "???"}
    node = {k: v for k, v in node.items() if not (k in required and v is None)}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(cls), node)
    except ConfigKeyError as exc:  # pragma: no cover - keys were checked above
        raise ConfigError(f"{where}: {_first_line(exc)}") from None
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", "") or ""
        bad = node.get(key.split(".")[0]) if key else None
        expected = next((f.type for f in fields(cls) if f.name == key.split(".")[0]), "?")
        raise ConfigError(
            f"{where}.{key}: {bad!r} is not valid for {what} ({_first_line(exc)}); "
            f"expected {expected}"
        ) from None
    missing = sorted(OmegaConf.missing_keys(merged))
    if missing:
        raise ConfigError(f"{where}.{missing[0]}: required by {what} but not set; set it in "
                          f"the config or on the command line ({where}.{missing[0]}=...)")
    obj = OmegaConf.to_object(merged)
    check = getattr(obj, "validate", None)
    if check is not None:
        try:
            check()
        except ValueError as exc:
            # "key: problem" from a validate() becomes "where.key: problem", the full key
            key, sep, rest = str(exc).partition(": ")
            if sep and key.split(".")[0].split("[")[0] in allowed:
                raise ConfigError(f"{where}.{key}: {rest}") from None
            raise ConfigError(f"{where}: {exc}") from None
    return obj


def instance(kind: str, name: str, node: Any, where: str) -> PluginInstance:
    """Resolve and validate one plugin instance from its YAML node."""
    if not isinstance(node, (dict, DictConfig)) or "plugin" not in node:
        raise ConfigError(
            f"{where}: needs a 'plugin:' key naming a registered {kind[:-1]} plugin "
            f"(see `evalkit plugins`)"
        )
    plugin = str(node["plugin"])
    from evalkit.errors import PluginError

    try:
        cls = registry().get(kind, plugin)
    except PluginError as exc:
        raise ConfigError(f"{where}.plugin: {exc}") from None
    params = {k: v for k, v in node.items() if k != "plugin"}
    config = validate_dataclass(cls.Config, OmegaConf.create(params), where,
                                f"{kind[:-1]} plugin '{plugin}'")
    return PluginInstance(kind, name, plugin, cls, config)


def _instances(kind: str, node: Any) -> list[PluginInstance]:
    if node is None:
        return []
    if not isinstance(node, DictConfig):
        raise ConfigError(
            f"{kind}: expected a mapping of instance name to config "
            f"({kind}.<name>.plugin: ...), got {type(node).__name__}"
        )
    # an instance name is a name, never a path: a plugin may name files after it (the
    # disagreements metric writes review/<name>.parquet), and it is shown as data
    return [instance(kind, check_name(str(k), kind, f"{kind[:-1]} name",
                                      example=f"{kind}.my_{kind[:-1]}"), v, f"{kind}.{k}")
            for k, v in node.items() if v is not None]


DEFAULT_FILTER = "pipeline_failure"
_INSTANCE_GROUPS = ("source", "filters", "judges", "metrics", "sinks", "runner", "generate")


def _default_filter(cfg: DictConfig) -> None:
    """Put the pipeline-failure filter first in every run that does not have one, so no
    judge scores (or bills for) a failed call's error envelope. ``filters.pipeline_failure=
    null`` turns it off; a filter of that plugin under another name stands for it."""
    node = cfg.get("filters")
    if isinstance(node, DictConfig) and DEFAULT_FILTER in node:
        return  # set, or explicitly null (off)
    if isinstance(node, DictConfig) and any(
            isinstance(v, DictConfig) and v.get("plugin") == DEFAULT_FILTER
            for v in node.values()):
        return
    existing = OmegaConf.to_container(node) if isinstance(node, DictConfig) else {}
    with open_dict(cfg):
        cfg.filters = {DEFAULT_FILTER: {"plugin": DEFAULT_FILTER}, **(existing or {})}


def _apply_flag_at(cfg: DictConfig) -> None:
    """The top-level ``flag_at`` (``>`` or ``>=``) given to every metric instance whose
    plugin has a ``flag_at`` key and does not set its own, and to every alert without an
    ``operator``: one setting decides how a score exactly at a threshold counts. The
    composed config (and so the manifest, which ``compare`` rebuilds metrics from) records
    each instance's value."""
    from evalkit.checks import DEFAULT_FLAG_AT, check_flag_at
    from evalkit.errors import PluginError

    flag_at = cfg.get("flag_at", DEFAULT_FLAG_AT)
    try:
        check_flag_at(flag_at)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    metrics = cfg.get("metrics")
    for node in metrics.values() if isinstance(metrics, DictConfig) else []:
        if not isinstance(node, DictConfig) or "plugin" not in node or "flag_at" in node:
            continue
        try:
            cls = registry().get("metrics", str(node["plugin"]))
        except PluginError:
            continue  # instance() reports it with the key
        if any(f.name == "flag_at" for f in fields(cls.Config)):
            with open_dict(node):
                node.flag_at = flag_at
    alerts = cfg.get("alerts")
    for alert in alerts if isinstance(alerts, ListConfig) else []:  # (load checks the rest)
        if isinstance(alert, DictConfig) and "operator" not in alert:
            with open_dict(alert):
                alert.operator = flag_at


def plain_override(arg: str) -> str:
    """One command-line override as Hydra should get it. A key inside a plugin instance or
    the runner (``judges.x.response_format=none``, ``source.record_id=id``) may be set
    without Hydra's ``+`` even when the preset's YAML does not list it: it goes to Hydra as
    ``++key`` (set or add), and :func:`load` checks it against the plugin's Config, which
    names the valid keys. ``experiment=x`` without the ``+`` is refused with the fix."""
    key, eq, value = arg.partition("=")
    group = key.lstrip("+~")
    if eq and re.search(r"(?<!\\)=", re.sub(r"'[^']*'|\"[^\"]*\"", "", value)) and \
            not re.match(r"\s*\w+\(", value):  # (a sweep function's keywords: range(start=0))
        # Hydra's grammar takes no '=' in a bare value (a URL's query string): it would fail
        # with "mismatched input '='" and exit 1
        # (the value is shown masked: a URL's query string holds tokens, its user-info a
        # password)
        raise ConfigError(f"{key.lstrip('+~')}: the value holds '=', which Hydra reads only "
                          f"quoted; write \"{key}='{mask(value)}'\" (the double quotes for "
                          "the shell)")
    if eq and group in ("experiment", "source", "runner", *_INSTANCE_GROUPS) and \
            any(re.fullmatch(r"[-+]?(\.?[0-9][0-9_.eE+-]*|inf|nan)|true|false|null|~", item, re.I)
                for item in re.split(r"[\[\],\s]+", value) if item):
        # Hydra itself fails on these with a traceback (a config name that is a number)
        raise ConfigError(f"{arg}: '{value}' is not the name of a {group} config; give one "
                          f"(evalkit run --help lists them)")
    if not eq or key.startswith(("+", "~")) or "@" in key:
        return arg
    parts = key.split(".")
    if parts == ["experiment"]:
        raise ConfigError(f"{arg}: an experiment is added with a '+': "
                          f"evalkit run +experiment={value}")
    if parts[0] in _INSTANCE_GROUPS and len(parts) >= 2:
        return "++" + arg
    return arg


def load(cfg: DictConfig, overrides: list[str] | None = None) -> RunConfig:
    """Validate the composed config; raise :class:`ConfigError` on the first problem.

    ``cfg`` itself is left unresolved: in a sweep, Hydra hands it back to the launcher in the
    job's return value, which submitit pickles to shared disk and Ray keeps in its object
    store, so a value resolved from the environment (a key, a URL's password) must not be
    written into it."""
    import copy

    cfg = copy.deepcopy(cfg)
    register_env_resolver()  # every value read from the environment is masked from now on
    try:
        OmegaConf.resolve(cfg)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{getattr(exc, 'full_key', '') or 'config'}: "
                          f"{_first_line(exc)}") from None
    for key in cfg:
        if key not in _TOP_KEYS:
            close = difflib.get_close_matches(str(key), _TOP_KEYS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(f"{key}: unknown top-level key; {hint}valid: {', '.join(_TOP_KEYS)}")
    _default_filter(cfg)
    _apply_flag_at(cfg)
    if cfg.get("source") is None:
        raise ConfigError("source: no source configured; pick one with source=jsonl "
                          "(and source.path=...) or +experiment=quickstart")
    runner = validate_dataclass(RunnerConfig, cfg.get("runner") or {}, "runner", "runner")
    experiment = check_name(str(cfg.get("experiment") or "default"), "experiment",
                            "experiment name")
    for key in ("run_id", "resume"):
        if getattr(runner, key) is not None:
            check_name(getattr(runner, key), f"runner.{key}")
    alerts_node = cfg.get("alerts") or []
    if not isinstance(alerts_node, (list, ListConfig)):
        raise ConfigError("alerts: expected a list of {metric, operator, value, severity}")
    alerts = [validate_dataclass(AlertConfig, a, f"alerts[{i}]", "alert")
              for i, a in enumerate(alerts_node)]
    gates = _gates(cfg.get("gates"))
    sweep = validate_dataclass(SweepConfig, cfg.get("sweep") or {}, "sweep", "sweep")
    resolved = OmegaConf.to_container(cfg, resolve=True)
    register_tree(resolved)  # its keys and URL credentials are masked wherever they show up
    source_node, source_shard = _source_shard(cfg.source)
    source_node, source_limit = _source_limit(source_node)
    source = instance("sources", "source", source_node, "source")
    groups = {kind: _instances(kind, cfg.get(kind))
              for kind in ("filters", "judges", "metrics", "sinks")}
    generate = None if cfg.get("generate") is None else \
        instance("generators", "generate", cfg.generate, "generate")
    # the manifest (and --cfg job) show every plugin's config with its defaults filled in
    resolved["source"] = {**_filled(source), **({"limit": source_limit}
                                                if source_limit is not None else {})}
    if source_shard is not None:
        resolved["source"]["shard"] = f"{source_shard[0]}/{source_shard[1]}"
    for kind, instances in groups.items():
        if instances:
            resolved[kind] = {i.name: _filled(i) for i in instances}
    if generate is not None:
        resolved["generate"] = _filled(generate)
    resolved["runner"] = dataclasses.asdict(runner)
    resolved["gates"] = [dataclasses.asdict(g) for g in gates]
    resolved["sweep"] = dataclasses.asdict(sweep)
    return RunConfig(
        experiment=experiment,
        runner=runner,
        source=source,
        filters=groups["filters"],
        judges=groups["judges"],
        metrics=groups["metrics"],
        alerts=alerts,
        composed=mask_tree(resolved),
        overrides=[mask_override(o) for o in (overrides or [])],
        sinks=groups["sinks"],
        source_limit=source_limit,
        source_shard=source_shard,
        gates=gates,
        generate=generate,
    )


NOTHING_TO_EVALUATE = (
    "nothing to evaluate: this config has no judges and no metrics, so the run only reads, "
    "filters and stores the records; pick an experiment (+experiment=quickstart) or add some "
    "(judges=[prompt_echo] metrics=[echo_rate]); `evalkit run --help` lists them")


def nothing_to_evaluate(rc: RunConfig) -> bool:
    """Whether ``rc`` has no judge, metric or sink: the run would store records and nothing
    else, which is worth saying (it looks like an evaluation that found nothing)."""
    return not (rc.judges or rc.metrics or rc.sinks)


def _filled(inst: PluginInstance) -> dict[str, Any]:
    """An instance's config as the plugin sees it: every key, defaults filled in."""
    return {"plugin": inst.plugin, **dataclasses.asdict(inst.config)}


def _source_shard(node: Any) -> tuple[Any, tuple[int, int] | None]:
    """``source.shard=i/n`` (any source: runner/shard.py) apart from the plugin's keys."""
    if not isinstance(node, DictConfig) or "shard" not in node:
        return node, None
    from evalkit.runner.shard import parse_shard

    shard = parse_shard(node.get("shard"))
    return OmegaConf.create({k: v for k, v in node.items() if k != "shard"}), shard


def _source_limit(node: Any) -> tuple[Any, int | None]:
    """``source.limit`` (any source: the first N records) apart from the plugin's keys."""
    if not isinstance(node, DictConfig) or node.get("limit") is None:
        if isinstance(node, DictConfig) and "limit" in node:
            node = OmegaConf.create({k: v for k, v in node.items() if k != "limit"})
        return node, None
    limit = node.get("limit")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"source.limit: {limit!r} is not a positive whole number; set "
                          "source.limit=N to read the first N records, or null for all")
    return OmegaConf.create({k: v for k, v in node.items() if k != "limit"}), limit
