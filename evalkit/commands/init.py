"""``evalkit init [DATA.jsonl]``: a starter ``./conf`` (an experiment over your JSONL file with
the usual filters, judges and metrics); ``evalkit init plugin NAME``: a judge plugin package
(entry point, config, test, README) that passes its own tests at once."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from evalkit.errors import ConfigError

__all__ = ["add_arguments", "main", "plugin_files", "starter_files", "write"]

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="*", metavar="DATA | plugin NAME",
                        help="your JSONL or CSV file (default: the bundled quickstart "
                        "sample), or `plugin NAME` for a plugin package")
    parser.add_argument("--name", default="starter",
                        help="the experiment's name (default: starter)")
    parser.add_argument("--dir", default=".", help="where to write (default: here)")
    parser.add_argument("--field", action="append", default=[], metavar="COLUMN=PATH",
                        help="map a record column yourself (output=response.choices.0.text); "
                        "repeatable")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")


def main(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    if args.what[:1] == ["plugin"]:
        if len(args.what) != 2:
            raise ConfigError("init: give the plugin's name: evalkit init plugin NAME")
        files = plugin_files(args.what[1])
        package_dir = root / ("evalkit-" + args.what[1].replace("_", "-"))
        hint = f"cd {package_dir} && pip install -e '.[test]' && python -m pytest"
    else:
        if len(args.what) > 1:
            raise ConfigError("init: give one JSONL or CSV file (or `plugin NAME`)")
        forced = _forced(getattr(args, "field", []))
        files, shown = starter_files(args.what[0] if args.what else None, args.name, forced)
        print(shown, end="")
        hint = f"evalkit run +experiment={args.name}"
    written = write(root, files, args.force)
    for path in written:
        print(f"wrote {path}")
    print(f"next: {hint}")
    return 0


def _forced(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        column, eq, path = item.partition("=")
        if not (eq and column and path):
            raise ConfigError(f"init: --field {item!r}: write COLUMN=PATH, e.g. "
                              "--field output=response.text")
        out[column.strip()] = path.strip()
    return out


def write(root: Path, files: dict[str, str], force: bool) -> list[Path]:
    """Write ``files`` (relative path -> text) under ``root``; refuse to overwrite one unless
    ``force``, before anything is written."""
    targets = {root / rel: text for rel, text in files.items()}
    existing = [str(p) for p in targets if p.exists()]
    if existing and not force:
        raise ConfigError(f"init: {', '.join(existing)} already exist(s); --force overwrites")
    for path, text in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(targets)


def _yaml(value: object, indent: int) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=False, sort_keys=False, width=90,
                          allow_unicode=True)
    return "".join(" " * indent + line + "\n" for line in text.splitlines())


def starter_files(data: str | None, name: str,
                  forced: dict[str, str] | None = None) -> tuple[dict[str, str], str]:
    """The experiment (and a judge preset) ``evalkit init`` writes for ``data``, and the
    proposal it prints: only the metrics the mapped columns can feed."""
    from evalkit.commands.init_mapping import (
        SHOWN,
        io_text,
        is_messages,
        propose,
        sample_rows,
        skipped_note,
    )
    from evalkit.sources._mapping import MAPPABLE

    if not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
        raise ConfigError(f"init: --name {name!r}: use letters, digits, _ and -")
    if data is not None and not Path(data).is_file():
        raise ConfigError(f"init: no file at '{data}'; give your JSONL or CSV file, or nothing "
                          "for the bundled sample")
    for column in forced or {}:
        if column not in MAPPABLE or column == "source":
            raise ConfigError(f"init: --field {column}=...: not a record column; record "
                              f"columns: {', '.join(c for c in MAPPABLE if c != 'source')}")
    if data is None:
        from importlib import resources

        sample = Path(str(resources.files("evalkit.data") / "quickstart.jsonl"))
        path, kind = "${evalkit.data:quickstart.jsonl}", "jsonl"
    else:
        sample, path = Path(data), data
        kind = "csv" if Path(data).name.lower().removesuffix(".gz").endswith(
            (".csv", ".tsv")) else "jsonl"
    skipped: list[tuple[int, str]] = []
    mapping = propose(sample_rows(Path(sample), skipped=skipped), forced)
    if skipped:
        mapping.notes.insert(0, skipped_note(skipped))
    found = mapping.proposals
    # a column read by its own name is left out, but for a message list: one named in
    # fields is read as its text (the last user message), the list kept in metadata
    fields = {c: found[c].spec() for c in SHOWN
              if c in found and c != "record_id" and (found[c].spec() != c or (
                  c in ("input", "output") and (is_messages(found[c].example) or
                                                found[c].message)))}
    judges = ["pipeline_failure"] + (["prompt_echo"] if "input" in found else []) + \
        (["exact_match"] if "reference" in found else [])
    metrics = ["pipeline_failure_rate"] + (["echo_rate"] if "input" in found else []) + \
        (["latency"] if "latency_s" in found else []) + \
        (["edit_rate"] if "user_action" in found else [])
    slices = ["model"] if "model" in found else []
    # runs of a tree whose other level holds the output: set aside first, with the reason
    tree = mapping.set_aside
    filters = (["sql"] if tree else []) + ["pipeline_failure"]
    own: dict[str, dict[str, object]] = {}
    if "reference" in found:
        # the share that matches (rate counts the flagged ones, the misses, by default)
        own["exact_match_rate"] = {"plugin": "rate", "judge": "exact_match",
                                   "count": "passed", "slice_by": slices}
    if not slices:  # the presets slice by model, which no row has
        own.update({metric: {"slice_by": []} for metric in metrics})
    source: dict[str, object] = {"path": path}
    if "record_id" in found:
        source["record_id"] = found["record_id"].path
    if mapping.scores_list is not None:
        source["scores_list"] = mapping.scores_list
    source["fields"] = fields
    seen = "".join(f"\n#   {line}" for line in io_text(mapping).splitlines())
    alerts = """
alerts:
  - metric: echo_rate
    operator: ">"
    value: 0.2
    severity: warning
    message: more than 20% of genuine completions echo their prompt
""" if "echo_rate" in metrics else ""
    experiment = f"""# @package _global_
# A starter evaluation written by `evalkit init`. Run it: evalkit run +experiment={name}
# Every row of the file is a record. `source.fields` says where each record column (input,
# output, model, level, latency_s, ...: docs/design.md) is in a row: a dotted path, or
# {{path, scale, map, default}} to convert units and categories (docs/sources.md).
# What init found, from the rows it sampled (? marks a guess: check it):{seen}
defaults:
  - override /source: {kind}
  - override /filters: [{", ".join(filters)}]   # failed calls are set aside, never judged
  - override /judges: [{", ".join(judges)}]
  - override /metrics: [{", ".join(metrics)}]
  - _self_

experiment: {name}
source:
{_yaml(source, 2)}
{"metrics:" + chr(10) + _yaml(own, 2) if own else ""}{_tree_filter(tree)}{alerts}"""
    judge = """# A judge preset of your own: use it with judges=[pipeline_failure,strict_echo]
# or in an experiment's defaults. `evalkit plugins prompt_echo` lists its keys.
strict_echo:
  plugin: prompt_echo
  threshold: 0.6
"""
    return ({f"conf/experiment/{name}.yaml": experiment, "conf/judges/strict_echo.yaml": judge},
            io_text(mapping))


def _tree_filter(tree: tuple[str, str] | None) -> str:
    if tree is None:
        return ""
    return "filters:\n" + _yaml({"sql": {"where": tree[0], "reason": tree[1]}}, 2)


def plugin_files(name: str) -> dict[str, str]:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(f"init plugin: {name!r}: a plugin name is snake_case (letters, "
                          "digits, _), starting with a letter")
    # my_judge -> MyJudge (not MyJudgeJudge); todo_words -> TodoWordsJudge
    stem = name.removesuffix("_judge") if name != "judge" else name
    cls = "".join(part.capitalize() for part in stem.split("_")) + "Judge"
    package = f"evalkit_{name}"
    dist = f"evalkit-{name.replace('_', '-')}"
    root = dist
    pyproject = f"""[build-system]
requires = ["hatchling>=1.21,<2"]
build-backend = "hatchling.build"

[project]
name = "{dist}"
version = "0.1.0"
description = "An evalkit judge: {name}."
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["evalkit>=0.1,<0.2", "pyarrow>=15,<27"]

[project.optional-dependencies]
test = ["pytest>=8,<10"]

# how evalkit finds the judge: `plugin: {name}` in a config
[project.entry-points."evalkit.judges"]
{name} = "{package}:{cls}"

[tool.hatch.build.targets.wheel]
packages = ["src/{package}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["src"]
"""
    module = f'''"""``{name}``: flags outputs that contain any of the configured words."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.plugin import Judge

__all__ = ["{cls}Config", "{cls}"]


@dataclass(frozen=True)
class {cls}Config:
    words: list[str] = field(default_factory=lambda: ["TODO", "lorem ipsum"])  # flagged words
    ignore_case: bool = True  # compare without regard to case

    def validate(self) -> None:
        if any(not w for w in self.words):
            raise ValueError("words: an empty word would flag every output")


class {cls}(Judge):
    """value 1.0 (passed false) when the output contains a configured word, else 0.0."""

    Config = {cls}Config
    thread_safe = True  # judge() is a pure function of the batch

    def __init__(self, name: str, config: {cls}Config, ctx: object) -> None:
        super().__init__(name, config, ctx)  # keeps self.name, self.config and self.ctx
        # set up here what judge() reuses on every batch (a compiled pattern, a client)

    def wanted_columns(self) -> list[str]:
        """The record columns :meth:`judge` reads (the runner adds ``record_id``)."""
        return ["output"]

    def judge(self, batch: pa.Table) -> pa.Table:
        output = pc.fill_null(batch.column("output"), "")
        hit = pa.repeat(pa.scalar(False), batch.num_rows)
        for word in self.config.words:
            hit = pc.or_(hit, pc.match_substring(output, word,
                                                 ignore_case=self.config.ignore_case))
        return pa.table({{
            "record_id": batch.column("record_id"),
            "value": pc.cast(hit, pa.float64()),
            "passed": pc.invert(hit),
            "label": pc.if_else(hit, "flagged", "clean"),
            "status": pa.repeat(pa.scalar("ok"), batch.num_rows),
        }})
'''
    test = f'''"""{name}: its verdicts, and evalkit's conformance suite for judges."""

from __future__ import annotations

import pyarrow as pa
import pytest
from {package} import {cls}, {cls}Config

from evalkit.testing.suites import JudgeSuite


@pytest.mark.parametrize("text, flagged", [
    ("Done. The export now streams.", False),
    ("TODO: write the answer", True),
    ("lorem IPSUM dolor", True),
    (None, False),
])
def test_flags_configured_words(text: str | None, flagged: bool) -> None:
    judge = {cls}("{name}", {cls}Config(), ctx=None)
    out = judge.judge(pa.table({{"record_id": ["r"], "output": pa.array([text], pa.string())}}))
    row = out.to_pylist()[0]
    assert (row["value"], row["passed"]) == (float(flagged), not flagged)


def test_an_empty_word_is_refused() -> None:
    with pytest.raises(ValueError, match="words"):
        {cls}Config(words=[""]).validate()


class Test{cls}Conformance(JudgeSuite):
    """evalkit's conformance suite, run on this plugin as on every built-in judge."""

    plugin = {cls}
'''
    preset = f"""# Copy into your project's conf/judges/ and use judges=[{name}]
{name}:
  plugin: {name}
  words: [TODO, lorem ipsum]
"""
    readme = f"""# {dist}

An [evalkit](https://github.com/) judge, `{name}`: flags outputs that contain any of the
configured words.

```bash
pip install -e ".[test]"       # installs the package and registers its entry point
python -m pytest               # its tests and evalkit's conformance suite for judges
evalkit plugins {name}         # its keys, types, defaults and meaning
cp conf/judges/{name}.yaml <your project>/conf/judges/
evalkit run +experiment=quickstart 'judges=[prompt_echo,{name}]' \\
    '+metrics.{name}_rate={{plugin: rate, judge: {name}}}'
```

Edit `src/{package}/__init__.py`: the `Config` dataclass (one comment per key) and
`judge()`, which returns one judgment per record it is given. See evalkit's
docs/plugin-authoring.md.
"""
    return {f"{root}/pyproject.toml": pyproject,
            f"{root}/src/{package}/__init__.py": module,
            f"{root}/tests/test_{name}.py": test,
            f"{root}/conf/judges/{name}.yaml": preset,
            f"{root}/README.md": readme}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(argparse.Namespace(what=sys.argv[1:], name="starter", dir=".",
                                     force=False)))
