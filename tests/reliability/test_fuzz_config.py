"""Property-based fuzzing of configs: command-line overrides of any key with any value,
composed by Hydra and checked by the real config loader (``evalkit.config.load``). For every
set of overrides: Hydra refuses what it cannot parse or compose (its own one-line error), and
everything it composes either loads or raises one :class:`EvalkitError` naming the key;
nothing else escapes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evalkit.errors import EvalkitError
from tests.reliability.fuzzing import COUNTS, fuzz

KEYS = [
    "source.path", "source.batch_size", "source.max_line_bytes", "source.workers",
    "source.record_id", "source.fields", "source.fields.output", "source.required",
    "source.scores", "source.extra_to_metadata", "source.limit", "source.nonsense",
    "runner.batch_size", "runner.runs_dir", "runner.run_id", "runner.fail_on",
    "runner.summary", "runner.summary_slices", "runner.dry_run", "runner.bogus",
    "judges.prompt_echo.threshold", "judges.prompt_echo.ngram", "judges.prompt_echo.plugin",
    "judges.prompt_echo.threshhold", "judges.new_one.plugin", "filters.pipeline_failure",
    "filters.pipeline_failure.plugin", "metrics.echo_rate.judge", "metrics.echo_rate",
    "alerts", "experiment", "unknown_top", "judges", "metrics", "source",
]
VALUES = st.one_of(
    st.sampled_from(["0", "-1", "1", "0.5", "1e999", "nan", "null", "true", "[]", "{}",
                     "[1,2]", "{a: 1}", "''", "x", "${oc.env:NO_SUCH_VAR}", "${nope}",
                     "${oc.env:HOME}", "'${'", "\\\\", "a,b", "[a", "{", "\"", "jsonl",
                     "csv", "prompt_echo", "error", "warning", "99999999999999999999999"]),
    st.integers().map(str), st.floats(allow_nan=False).map(repr),
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=8),
)
OVERRIDE = st.tuples(st.sampled_from(["", "+", "++", "~"]), st.sampled_from(KEYS),
                     VALUES).map(lambda t: f"{t[0]}{t[1]}={t[2]}" if t[0] != "~" else
                                 f"~{t[1]}")


@fuzz(examples=40)
@given(overrides=st.lists(OVERRIDE, max_size=4), experiment=st.booleans())
def test_fuzzed_overrides_load_or_fail_with_one_user_error(overrides: list[str],
                                                           experiment: bool) -> None:
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    from evalkit import config as config_mod
    from evalkit.runner.app import register_resolvers

    register_resolvers()
    counts = COUNTS["config"]
    counts["examples"] += 1
    try:
        args = [config_mod.plain_override(o) for o in overrides]
    except EvalkitError:
        counts["refused_by_evalkit"] += 1
        return
    if experiment:
        args.insert(0, "+experiment=quickstart")
    try:
        with initialize_config_module("evalkit.conf", version_base="1.3"):
            cfg = compose(config_name="config", overrides=args)
    except HydraException:
        counts["refused_by_hydra"] += 1
        return
    try:
        config_mod.load(cfg, args)
    except EvalkitError as exc:
        assert str(exc).strip() and "Traceback" not in str(exc)
        counts["refused_by_evalkit"] += 1
        return
    counts["loaded"] += 1


def test_what_fuzzing_found_is_one_line_and_exit_2(tmp_path) -> None:
    """A config group given a number (Hydra raised a ValueError traceback) and alerts given
    a number (a TypeError in the loader)."""
    from tests.conftest import run_cli

    for args in (["+experiment=0"], ["+experiment=quickstart", "judges=0"], ["judges=nan"],
                 ["+experiment=quickstart", "judges=[1,2]"],
                 ["+experiment=quickstart", "alerts=-1"]):
        proc = run_cli("run", *args, cwd=tmp_path, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("evalkit: error: ") and "Traceback" not in proc.stderr
