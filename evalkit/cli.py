"""The ``evalkit`` command. Subcommands import their modules only when called, so
``evalkit --help`` and ``evalkit query`` start fast (litellm and Hydra stay unloaded)."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

__all__ = ["COMMANDS", "main"]

# name -> (module, one-line help). Each module has main(argv) (``run`` hands argv to Hydra)
# or add_arguments(parser) + main(args).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("evalkit.runner.app", "run an experiment (Hydra: +experiment=NAME, overrides, -m)"),
    "query": ("evalkit.commands.query", "SQL (DuckDB) over every run in the runs directory"),
    "plugins": ("evalkit.commands.plugins", "list installed sources, filters, judges, metrics"),
    "compare": ("evalkit.commands.compare", "metric deltas of two runs, paired-bootstrap CIs"),
    "push": ("evalkit.commands.push", "send a run's judgments elsewhere (--to langfuse: scores)"),
    "report": ("evalkit.commands.report", "self-contained HTML report of runs (+ Markdown, JUnit)"),
    "init": ("evalkit.commands.init", "a starter ./conf, or a plugin package (init plugin NAME)"),
    "merge": ("evalkit.commands.merge", "the shards of one run (source.shard=i/n) as one run"),
    "label": ("evalkit.commands.label", "human labels: import a file, or draw a sample to label"),
    "review": ("evalkit.commands.review", "an offline HTML page to label a drawn sample by hand"),
    "compact": ("evalkit.commands.compact", "merge finished runs' judgment parts into one file"),
    "completion": ("evalkit.commands.completion", "print the shell completion script (bash, zsh)"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalkit",
        description="Evaluate LLM applications from declarative Hydra configs.",
        epilog="`evalkit run --help` shows the config groups and Hydra's options. "
        "Set EVALKIT_FULL_ERROR=1 to see tracebacks.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=name != "run")
    return parser


def _version() -> str:
    from importlib.metadata import version

    return f"evalkit {version('evalkit')}"


def _exit(code: int) -> None:
    """End the process with ``code``. After a command that used a runs directory on S3 the
    interpreter's own exit is skipped (its output flushed first, every file already closed):
    the AWS SDK's threads, torn down with it, ended about one process in twenty with
    std::terminate (exit -6) after the answer was printed (pyarrow 26, apache/arrow#50188)."""
    if "pyarrow._s3fs" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    command_line = argv is None  # the process's own command: it ends when this returns
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-sc", "--shell-completion"):  # Hydra's installed script asks so
        from evalkit.runner.app import shell_completion

        sys.exit(shell_completion(argv))
    if not argv or argv[0] not in COMMANDS and argv[0] != "__complete":
        _parser().parse_args(argv or ["--help"])
        return
    if argv[0] == "__complete":  # what the completion script asks (not listed in --help)
        from evalkit.commands.completion import complete_main

        sys.exit(complete_main())
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(COMMANDS[name][0])
    if name == "run":
        try:
            module.main(rest)
        finally:
            # the interpreter's exit runs the cyclic GC over every object still alive: over a
            # second once litellm is loaded, for memory the OS takes back anyway
            if command_line:
                gc.freeze()
        return
    parser = argparse.ArgumentParser(prog=f"evalkit {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    from evalkit.errors import EvalkitError

    try:
        try:
            code = module.main(args)
        except OSError as exc:  # a full disk, a read-only directory, a path in the way
            from evalkit.errors import disk_error

            raise disk_error(name, exc) from exc
        except Exception as exc:
            # a file DuckDB or Arrow cannot read (a run's odd table) names itself in its
            # first line: that line, not a traceback
            if type(exc).__module__.split(".")[0] not in ("duckdb", "_duckdb", "pyarrow"):
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise EvalkitError(f"{name}: {first}") from exc
    except EvalkitError as exc:
        if os.environ.get("EVALKIT_FULL_ERROR"):
            raise
        from evalkit.redact import mask
        from evalkit.safetext import visible

        print(f"evalkit: error: {visible(mask(str(exc)), newlines=True)}", file=sys.stderr)
        _exit(exc.exit_code) if command_line else sys.exit(exc.exit_code)
    _exit(code or 0) if command_line else sys.exit(code or 0)
