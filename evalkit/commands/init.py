"""``evalkit init [DATA.jsonl]``: a starter ``./conf`` (an experiment over your JSONL file with
the usual filters, judges and metrics); ``evalkit init plugin NAME``: a judge plugin package
(entry point, config, test, README) that passes its own tests at once."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from evalkit.errors import ConfigError

__all__ = ["add_arguments", "main", "plugin_files", "starter_files", "write"]

# the keys a first line often uses for what evalkit calls input and output
_GUESSES = {"output": ("output", "response", "completion", "answer", "generation", "text"),
            "input": ("input", "prompt", "question", "query", "messages")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="*", metavar="DATA.jsonl | plugin NAME",
                        help="your JSONL file (default: the bundled quickstart sample), or "
                        "`plugin NAME` for a plugin package")
    parser.add_argument("--name", default="starter",
                        help="the experiment's name (default: starter)")
    parser.add_argument("--dir", default=".", help="where to write (default: here)")
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
            raise ConfigError("init: give one JSONL file (or `plugin NAME`)")
        files = starter_files(args.what[0] if args.what else None, args.name)
        hint = f"evalkit run +experiment={args.name}"
    written = write(root, files, args.force)
    for path in written:
        print(f"wrote {path}")
    print(f"next: {hint}")
    return 0


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


def _first_keys(data: str) -> list[str]:
    """The top-level keys of the file's first JSON object (none when it cannot be read)."""
    try:
        with open(data, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    first = json.loads(line)
                    return list(first) if isinstance(first, dict) else []
    except (OSError, ValueError):
        return []
    return []


def starter_files(data: str | None, name: str) -> dict[str, str]:
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
        raise ConfigError(f"init: --name {name!r}: use letters, digits, _ and -")
    if data is not None and not Path(data).is_file():
        raise ConfigError(f"init: no file at '{data}'; give your JSONL file, or nothing for "
                          "the bundled sample")
    path = data if data is not None else "${evalkit.data:quickstart.jsonl}"
    keys = _first_keys(data) if data is not None else []
    fields = {}
    for column, guesses in _GUESSES.items():
        if keys and column not in keys:
            found = next((k for k in guesses if k in keys), None)
            if found:
                fields[column] = found
    fields_yaml = "".join(f"\n    {k}: {v}" for k, v in fields.items()) or " {}"
    seen = f"\n# The first line of {data} has the keys: {', '.join(keys)}." if keys else ""
    experiment = f"""# @package _global_
# A starter evaluation written by `evalkit init`. Run it: evalkit run +experiment={name}
# Every line of the JSONL file is a record. evalkit reads a record column (input, output,
# model, level, latency_s, cost_usd, reference, ...: docs/design.md) from the key of the
# same name, or from the dotted path `source.fields` gives it.{seen}
defaults:
  - override /source: jsonl
  - override /filters: [pipeline_failure]   # failed calls are set aside, never judged
  - override /judges: [pipeline_failure, prompt_echo]
  - override /metrics: [pipeline_failure_rate, echo_rate, latency]
  - _self_

experiment: {name}
source:
  path: {path}
  fields:{fields_yaml}
  # record_id: id          # a stable id per line (default: file name and line)

alerts:
  - metric: echo_rate
    operator: ">"
    value: 0.2
    severity: warning
    message: more than 20% of genuine completions echo their prompt
"""
    judge = """# A judge preset of your own: use it with judges=[pipeline_failure,strict_echo]
# or in an experiment's defaults. `evalkit plugins prompt_echo` lists its keys.
strict_echo:
  plugin: prompt_echo
  threshold: 0.6
"""
    return {f"conf/experiment/{name}.yaml": experiment, "conf/judges/strict_echo.yaml": judge}


def plugin_files(name: str) -> dict[str, str]:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(f"init plugin: {name!r}: a plugin name is snake_case (letters, "
                          "digits, _), starting with a letter")
    cls = "".join(part.capitalize() for part in name.split("_")) + "Judge"
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
        self.config = config

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
evalkit run +experiment=quickstart 'judges=[{name}]'
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
