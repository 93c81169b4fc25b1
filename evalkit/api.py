"""evalkit from Python (a notebook, a script): run an experiment, open a finished run, read its
tables as Arrow or pandas, and join them with your own data, explicitly.

    import evalkit
    run = evalkit.run("quickstart", overrides=["judges.prompt_echo.threshold=0.8"])
    run.metrics.to_pandas()
    again = evalkit.open_run("latest")            # or a run id, or a run directory
    again.query("SELECT m.*, l.owner FROM metrics m JOIN labels l USING (slice)",
                labels=my_labels_dataframe)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.errors import ConfigError, EvalkitError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Run", "run", "open_run"]

TABLES = ("records", "judgments", "metrics", "alerts", "rejects")


@dataclass
class Run:
    """A finished run: its directory, manifest and tables (read when first asked for)."""

    run_dir: Path
    manifest: dict[str, Any] = field(repr=False)
    _tables: dict[str, pa.Table] = field(default_factory=dict, repr=False)

    @property
    def id(self) -> str:
        return str(self.manifest["run_id"])

    @property
    def experiment(self) -> str:
        return str(self.manifest.get("experiment"))

    @property
    def status(self) -> str:
        return str(self.manifest.get("status"))

    def table(self, name: str) -> pa.Table:
        """One of the run's tables (``records``, ``judgments``, ``metrics``, ``alerts``,
        ``rejects``) as an Arrow table."""
        if name not in TABLES:
            raise EvalkitError(f"run {self.id}: no table '{name}'; tables: {', '.join(TABLES)}")
        if name not in self._tables:
            import pyarrow.parquet as pq

            from evalkit.results import schemas

            path = self.run_dir / ("judgments" if name == "judgments" else f"{name}.parquet")
            if path.exists() and (path.is_file() or any(path.glob("*.parquet"))):
                self._tables[name] = pq.read_table(path)
            else:
                self._tables[name] = getattr(schemas, name.upper()).empty_table()
        return self._tables[name]

    records = property(lambda self: self.table("records"))
    judgments = property(lambda self: self.table("judgments"))
    metrics = property(lambda self: self.table("metrics"))
    alerts = property(lambda self: self.table("alerts"))
    rejects = property(lambda self: self.table("rejects"))

    def df(self, name: str) -> Any:
        """One of the run's tables as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise EvalkitError("Run.df needs pandas: pip install pandas (or use "
                               f"Run.table('{name}'), an Arrow table)") from None
        return self.table(name).to_pandas()

    def query(self, sql: str, **tables: Any) -> pa.Table:
        """``sql`` over this run's views (``records``, ``judgments``, ``metrics``, ``alerts``,
        ``rejects``, ``runs``), with your own data joined in explicitly: each keyword is a
        view name and an Arrow table or pandas DataFrame you read yourself (labels, a
        reference set); a view name is an identifier (letters, digits, ``_``). The query
        reads nothing else."""
        from evalkit.results.query import ReadOnlyConnection, connect
        from evalkit.results.sandbox import check_identifier, quote_identifier

        for name in tables:  # before anything is read: a name is an identifier, never SQL
            check_identifier(name, "query")
        con = connect(self.run_dir.parent.parent, run=self.run_dir)
        for name, data in tables.items():
            # a table of the connection's own database, which the query's cursor sees (a
            # registered view lives in this connection's temporary schema only)
            con.register("_evalkit_user_data", data)
            con.execute(f"CREATE TABLE {quote_identifier(name)} AS "
                        "SELECT * FROM _evalkit_user_data")
            con.unregister("_evalkit_user_data")
        return ReadOnlyConnection(con).sql(sql).arrow()

    def __repr__(self) -> str:
        m = self.manifest
        return (f"Run({self.id!r}, experiment={self.experiment!r}, status={self.status!r}, "
                f"records={m.get('n_records')}, excluded={m.get('n_excluded')}, "
                f"dir={str(self.run_dir)!r})")


def open_run(ref: str = "latest", runs_dir: str | os.PathLike[str] = "runs") -> Run:
    """A finished run: ``latest`` (the run that finished last), a run id under ``runs_dir``,
    or a run directory."""

    from evalkit.commands._runs import find_run
    from evalkit.results.storage import is_remote, shown_url

    for where in (ref, runs_dir):
        if is_remote(where):  # (evalkit.run returns the URL of a run written there)
            raise EvalkitError(f"open_run: {shown_url(str(where))} is on object storage; read "
                               "it with evalkit.connect(RUNS_URL, run=RUN_ID), or copy it to "
                               "disk and open that")
    runs = Path(runs_dir)
    if not Path(ref).is_dir() and not runs.is_dir():
        raise EvalkitError(f"no runs directory at '{runs.resolve()}'")
    run_dir = find_run(ref, runs, "open_run")
    from evalkit.results.runfiles import load_manifest

    return Run(run_dir, load_manifest(run_dir))


def run(experiment: str | None = None, overrides: list[str] | tuple[str, ...] = (), *,
        summary: bool = False) -> Run:
    """Compose and run an experiment as ``evalkit run +experiment=EXPERIMENT OVERRIDES``
    would (your ``./conf`` or ``$EVALKIT_USER_CONF`` included), and return the finished run.
    Overrides are written as on the command line: ``"judges.prompt_echo.threshold=0.8"``.
    A config error raises :class:`~evalkit.errors.ConfigError` naming the key."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    from evalkit import config as config_mod
    from evalkit.runner.app import register_resolvers, unknown_option
    from evalkit.runner.conffiles import check_config_dirs, searched_dirs
    from evalkit.runner.pipeline import execute

    register_resolvers()
    args = [config_mod.plain_override(o) for o in overrides]
    if experiment is not None:
        args.insert(0, f"+experiment={experiment}")
    user_conf = Path(os.environ.get("EVALKIT_USER_CONF", "conf"))
    check_config_dirs(searched_dirs(args, user_conf))  # sizes and alias expansion bounded
    hydra_args = list(args)
    if user_conf.is_dir():
        hydra_args.append(f"hydra.searchpath=[file://{user_conf.resolve()}]")
    unknown = unknown_option(hydra_args)  # Hydra's own error names no alternative
    if unknown:
        raise ConfigError(unknown)
    if not summary:
        hydra_args.append("++runner.summary=false")
    try:
        with initialize_config_module("evalkit.conf", version_base="1.3"):
            cfg = compose(config_name="config", overrides=hydra_args)
    except HydraException as exc:
        raise ConfigError(str(exc).splitlines()[0]) from None
    result = execute(config_mod.load(cfg, args))
    return open_run(str(result.run_dir))

