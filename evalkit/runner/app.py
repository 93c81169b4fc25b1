"""``evalkit run``: Hydra composes the config, the pipeline runs it.

Hydra owns the command line here (``--cfg job``, ``--help``, overrides, ``+experiment=``,
``-m``), so every Hydra habit works as-is. The config tree ships inside the package
(``evalkit/conf``); ``./conf`` in the working directory is on the search path too."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from importlib import resources
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from evalkit.errors import EvalkitError
from evalkit.redact import hide_secret_overrides, mask
from evalkit.runner.conffiles import check_config_dirs, searched_dirs
from evalkit.safetext import visible

__all__ = ["main", "plain_overrides", "register_resolvers", "shell_completion", "with_override"]


def _data_path(name: str) -> str:
    """``${evalkit.data:quickstart.jsonl}``: the path of a data file (or directory) bundled
    with evalkit."""
    path = resources.files("evalkit.data") / name
    if not (path.is_file() or path.is_dir()):
        raise ValueError(f"no bundled data file '{name}' in evalkit/data")
    return str(path)


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("evalkit.data"):
        OmegaConf.register_new_resolver("evalkit.data", _data_path)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def _task(cfg: DictConfig) -> dict | None:
    """One run; in a sweep, returns the job's end as noted in the sweep's status file."""
    from hydra.core.hydra_config import HydraConfig

    from evalkit import config as config_mod
    from evalkit.runner import sweep
    from evalkit.runner.pipeline import execute

    overrides = list(HydraConfig.get().overrides.task)
    job = sweep.current_job()  # None outside a sweep
    if job is not None:
        import socket

        sweep.note({"job": job["job"], "event": "start", "overrides": [mask(o) for o in overrides],
                    "pid": os.getpid(), "host": socket.gethostname()})
    run_dir = None
    try:
        rc = config_mod.load(cfg, overrides)
        if _SHOW_JOB_CONFIG:
            print(OmegaConf.to_yaml(rc.composed), end="")
            return None
        if job is not None:
            from evalkit.results.names import run_dir_of
            from evalkit.runner.run import new_run_id

            run_id = rc.runner.run_id or new_run_id()
            rc = dataclasses.replace(rc, sweep=job,
                                     runner=dataclasses.replace(rc.runner, run_id=run_id))
            run_dir = str(run_dir_of(Path(rc.runner.runs_dir), rc.experiment, run_id))
            # the closing table names the run of a job whose process dies
            sweep.note({"job": job["job"], "event": "run", "run_dir": run_dir})
        result = execute(rc)
        if config_mod.nothing_to_evaluate(rc):  # said after the run, which stored the records
            print(f"evalkit: warning: {config_mod.NOTHING_TO_EVALUATE}", file=sys.stderr)
        if rc.runner.report and not rc.runner.dry_run:
            from evalkit.report._sweep import note_sweep_run

            note_sweep_run(result.run_dir)
    except KeyboardInterrupt:  # before the run started (a run turns it into RunInterrupted)
        print("evalkit: interrupted", file=sys.stderr)
        sys.exit(130)
    except EvalkitError as exc:
        if os.environ.get("EVALKIT_FULL_ERROR"):
            raise
        print(f"evalkit: error: {visible(mask(str(exc)), newlines=True)}", file=sys.stderr)
        if job is None:
            sys.exit(exc.exit_code)
        # in a sweep the job ends here and the others go on; the sweep's exit code says it
        return sweep.note({"job": job["job"], "event": "end", "status": "failed",
                           "exit": exc.exit_code, "error": mask(str(exc)),
                           "run_dir": _if_run(run_dir)})
    except Exception as exc:
        if job is None or os.environ.get("EVALKIT_FULL_ERROR"):
            raise
        import traceback

        print(mask(traceback.format_exc()), file=sys.stderr)
        return sweep.note({"job": job["job"], "event": "end", "status": "failed", "exit": 1,
                           "error": mask(f"{type(exc).__name__}: {exc}"),
                           "run_dir": _if_run(run_dir)})
    if job is not None:
        return sweep.note({"job": job["job"], "event": "end", "status": "ok", "exit": 0,
                           "run_dir": str(result.run_dir)})
    return None


def _if_run(run_dir: str | None) -> str | None:
    """``run_dir`` when the failed run left one (a manifest saying why)."""
    return run_dir if run_dir and (Path(run_dir) / "manifest.json").exists() else None


def main(argv: list[str]) -> None:
    """Run Hydra's command line with ``argv`` (everything after ``evalkit run``)."""
    from evalkit._log import log_level, take_verbose_flags

    if any(a in ("-sc", "--shell-completion") for a in argv):
        sys.exit(shell_completion(argv))
    argv = _take_cfg_job(argv)
    argv = take_verbose_flags(argv)
    if os.environ.get("EVALKIT_LOG_LEVEL", "").upper() in ("INFO", "DEBUG") and \
            not any(a.lstrip("+~").startswith("hydra/hydra_logging=") for a in argv):
        argv = [*argv, "hydra/hydra_logging=default"]  # Hydra's launch lines too
    # a secret value on the command line reaches the jobs through the environment, never a
    # sweep's multirun.yaml or Hydra's console lines
    argv = hide_secret_overrides(argv)
    try:
        log_level()
    except EvalkitError as exc:
        print(f"evalkit: error: {visible(mask(str(exc)), newlines=True)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    argv = _take_resume(argv)
    missing = missing_launcher(argv)
    if missing:
        print(f"evalkit: error: {missing}", file=sys.stderr)
        sys.exit(2)
    register_resolvers()
    try:
        argv = plain_overrides(argv)
    except EvalkitError as exc:
        print(f"evalkit: error: {visible(mask(str(exc)), newlines=True)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    user_conf = Path(os.environ.get("EVALKIT_USER_CONF", "conf"))
    try:  # before Hydra reads them: sizes and alias expansion bounded
        check_config_dirs(searched_dirs(argv, user_conf))
    except EvalkitError as exc:
        print(f"evalkit: error: {visible(mask(str(exc)), newlines=True)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    argv = with_user_conf(argv)
    unknown = unknown_option(argv)
    if unknown:
        print(f"evalkit: error: {visible(unknown)}", file=sys.stderr)
        sys.exit(2)
    sys.argv = ["evalkit run", *argv]
    import warnings

    # evalkit's hydra/launcher/ray.yaml (and submitit_*.yaml) extend the plugins' schemas of
    # the same name, as meant (hydra_plugins/evalkit_*_launcher); Hydra 1.3 still merges them,
    # with a warning
    warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/(ray|submitit_slurm|"
                            r"submitit_local)' is validated against")
    from evalkit.runner import sweep

    try:
        if not sweep.is_multirun(argv) or _SHOW_JOB_CONFIG:
            _task()
            return
        status = sweep.start()
        stopped = False  # by Ctrl-C: the jobs got it too; the table waits a little for them
        try:
            _task()
        except KeyboardInterrupt:
            stopped = True
            raise
        finally:
            code = sweep.finish(status, sweep.planned(argv),
                                wait_s=_STOPPED_WAIT_S if stopped else float("inf"))
    except KeyboardInterrupt:  # while Hydra composes the config
        print("evalkit: interrupted", file=sys.stderr)
        sys.exit(130)
    if code:
        sys.exit(code)


def with_user_conf(argv: list[str]) -> list[str]:
    """``argv`` with the user's ``./conf`` (``EVALKIT_USER_CONF``) on Hydra's search path, when
    there is one and no ``hydra.searchpath`` is given."""
    user_conf = Path(os.environ.get("EVALKIT_USER_CONF", "conf"))
    if user_conf.is_dir() and not any(a.startswith("hydra.searchpath") for a in argv):
        argv = with_override(argv, f"hydra.searchpath=[file://{user_conf.resolve()}]")
    return argv


_GROUP_PICK = re.compile(r"^\+{0,2}([a-z_][a-z0-9_]*)=(\[?)([\w.-]*(?:,[\w.-]+)*)\]?$")


def unknown_option(argv: list[str]) -> str | None:
    """The one-line error for an override that picks a config its group does not have
    (``judges=[refusl]``, ``source=jsnl``), with the closest name and what the group has;
    ``None`` when every pick exists. Hydra's own error is a page on the config search path.
    The group's configs are listed the way Hydra finds them (evalkit's, the user's
    ``hydra.searchpath``, search-path plugins'); a value that is not a plain name or list of
    names (a sweep function, an interpolation) is left to Hydra."""
    if any(a.split("=")[0] in ("--config-dir", "-cd", "--config-path", "-cp", "--config-name",
                               "-cn") for a in argv):
        return None  # configs from elsewhere: Hydra's to find
    picks = []
    for arg in argv:
        m = _GROUP_PICK.match(arg)
        if m and m.group(3) and (m.group(2) or "," not in m.group(3)):  # (a,b: a sweep)
            picks.append((arg, m.group(1), m.group(3).split(",")))
    if not picks:
        return None
    import difflib

    from hydra._internal.config_repository import ConfigRepository
    from hydra._internal.utils import create_config_search_path

    search_path = create_config_search_path("pkg://evalkit.conf")
    for arg in argv:
        key, _, value = arg.partition("=")
        if key.lstrip("+") == "hydra.searchpath":
            for path in value.strip("[]").split(","):
                if path.strip():
                    search_path.append("command-line", path.strip())
    repo = ConfigRepository(search_path)
    for arg, group, names in picks:
        if not repo.group_exists(group):
            continue  # a config key (runner=...), not a group: Hydra's to judge
        options = repo.get_group_options(group)
        for name in names:
            if name not in options and name != "null":
                close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]}?" if close else ""
                return (f"{arg}: the group {group} has no config '{name}'{hint} (it has: "
                        f"{', '.join(options)}; a config of your own goes in "
                        f"conf/{group}/{name}.yaml)")
    return None


# launchers of Hydra plugins evalkit does not install: the module that provides each, and
# the extra that installs it (Ray's launcher says so itself: hydra_plugins/evalkit_ray_launcher)
_LAUNCHERS = {"submitit_": ("hydra_plugins.hydra_submitit_launcher", "submitit")}


def missing_launcher(argv: list[str]) -> str | None:
    """The one-line error for ``hydra/launcher=NAME`` when the plugin providing NAME is not
    installed (Hydra's own is a page on the config search path), else ``None``."""
    import importlib.util

    for arg in argv:
        key, _, name = arg.partition("=")
        if key.lstrip("+~") != "hydra/launcher":
            continue
        for prefix, (module, extra) in _LAUNCHERS.items():
            if name.startswith(prefix) and importlib.util.find_spec(module) is None:
                return (f"hydra/launcher={name} needs Hydra's submitit launcher, which is not "
                        f'installed: pip install "evalkit[{extra}]"')
    return None


_STOPPED_WAIT_S = 10.0  # after Ctrl-C: how long the jobs may take to mark their runs


def _take_resume(argv: list[str]) -> list[str]:
    """``--resume RUN`` (or ``--resume=RUN``) as the override ``runner.resume=RUN``."""
    out: list[str] = []
    rest = iter(argv)
    for arg in rest:
        if arg == "--resume" or arg.startswith("--resume="):
            run = arg.partition("=")[2] if "=" in arg else next(rest, "")
            if not run or run.startswith("-"):
                print("evalkit: error: --resume needs a run id (evalkit run ... --resume RUN)",
                      file=sys.stderr)
                sys.exit(2)
            out = with_override(out, f"runner.resume={run}")
        else:
            out.append(arg)
    return out


_SHOW_JOB_CONFIG = False


def _take_cfg_job(argv: list[str]) -> list[str]:
    """``--cfg job`` (``-c job``) is answered by evalkit, not Hydra: the config as the run would
    use it, validated, with every plugin's defaults filled in and secrets masked (Hydra's
    shows only the keys the YAML files set). ``--cfg hydra|all`` stay Hydra's."""
    global _SHOW_JOB_CONFIG
    for i, arg in enumerate(argv[:-1]):
        if arg in ("--cfg", "-c") and argv[i + 1] == "job":
            _SHOW_JOB_CONFIG = True
            return [a for j, a in enumerate(argv) if j not in (i, i + 1) and a != "--resolve"]
    return argv


def shell_completion(argv: list[str]) -> int:
    """``-sc install=bash|zsh`` (``uninstall=``, ``query=``): Hydra's shell completion, done
    by evalkit's own script, which completes every command and not only ``run``'s overrides
    (Hydra's script asked ``evalkit -sc query=bash``, which evalkit refused)."""
    from evalkit.commands.completion import SCRIPTS, complete_main

    i = next(i for i, a in enumerate(argv) if a in ("-sc", "--shell-completion"))
    action, _, shell = (argv[i + 1] if i + 1 < len(argv) else "").partition("=")
    if shell not in SCRIPTS or action not in ("install", "uninstall", "query"):
        print("evalkit: error: -sc takes install=bash, install=zsh (or uninstall=, query=); "
              "or run `evalkit completion bash`", file=sys.stderr)
        return 2
    if action == "install":
        sys.stdout.write(SCRIPTS[shell])
    elif action == "uninstall":
        print("complete -r evalkit")
    else:
        return complete_main()
    return 0


# Hydra's options that take the next argument as their value (``--info`` takes one only
# when it is one of its choices)
_VALUE_OPTIONS = {"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name",
                  "-cn", "--config-dir", "-cd", "--experimental-rerun"}
_INFO_CHOICES = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}


def _override_positions(argv: list[str]) -> list[int]:
    """Where the overrides are in ``argv``: the positional arguments, not Hydra's options
    and their values."""
    found, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            found.append(i)
        elif arg in _VALUE_OPTIONS:
            i += 1
        elif arg in ("--info", "-i") and i + 1 < len(argv) and argv[i + 1] in _INFO_CHOICES:
            i += 1
        i += 1
    return found


def plain_overrides(argv: list[str]) -> list[str]:
    """``argv`` with each override as Hydra should get it (``config.plain_override``)."""
    from evalkit.config import plain_override

    argv = list(argv)
    for i in _override_positions(argv):
        argv[i] = plain_override(argv[i])
    return argv


def with_override(argv: list[str], override: str) -> list[str]:
    """``argv`` with ``override`` added among the overrides. Hydra reads the overrides as
    one run of positional arguments, so an override put before an option (``-m``) would
    start a run the option ends, and the overrides after it would be "unrecognized": the
    override goes just before the first positional argument, or last when there is none."""
    positions = _override_positions(argv)
    if positions:
        return [*argv[:positions[0]], override, *argv[positions[0]:]]
    return [*argv, override]
