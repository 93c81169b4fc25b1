"""The documentation stays true to the code: the configuration reference is generated from the
plugins' Config dataclasses, the design's tables list the real columns, every dependency has
its reason, and the README stays a short guide."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evalkit.configdoc import MARKER, config_keys, render
from evalkit.results.columns import COLUMNS

ROOT = Path(__file__).resolve().parents[2]


def test_configuration_reference_is_up_to_date() -> None:
    path = ROOT / "docs" / "configuration.md"
    assert MARKER in path.read_text(encoding="utf-8")
    assert path.read_text(encoding="utf-8") == render(path), (
        "docs/configuration.md is stale: run `.venv/bin/python -m evalkit.configdoc "
        "docs/configuration.md` and commit the result"
    )


@dataclass(frozen=True)
class _Base:
    shared: int = 1  # from the base
    # an own-line comment
    # over two lines
    above: str = "x"
    plain: bool = False


@dataclass(frozen=True)
class _Child(_Base):
    shared: int = 2  # the child's own word
    required: str = "???"  # must be set
    listed: list[str] = field(default_factory=lambda: ["a", "b"])  # a factory's value
    spread: dict[str, int] = field(  # a comment on the
        default_factory=dict)  # field's lines
    optional: str | None = None


def test_config_keys_reads_types_defaults_and_comments() -> None:
    keys = {k.name: k for k in config_keys(_Child)}
    assert list(keys) == ["shared", "above", "plain", "required", "listed", "spread",
                          "optional"]
    assert (keys["shared"].default, keys["shared"].comment) == ("2", "the child's own word")
    assert keys["above"].comment == "an own-line comment over two lines"
    assert keys["plain"].comment == "" and keys["plain"].default == "false"
    assert keys["required"].default == "(required)"
    assert keys["listed"].default == '["a", "b"]' and keys["listed"].type == "list[str]"
    assert keys["spread"].comment == "a comment on the field's lines"
    assert keys["optional"].type == "str | None" and keys["optional"].default == "null"


def test_every_builtin_config_key_has_a_comment() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    generated = text.split(MARKER)[1]
    bare = [line for line in generated.splitlines() if re.fullmatch(r"\|.*\|\s+\|", line)]
    assert not bare, f"config keys without a comment (add one on the field's line): {bare}"


def test_design_lists_every_column_of_every_table() -> None:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for table, columns in COLUMNS.items():
        section = re.search(rf"^### {table}\n(.*?)(?=^### |^## )", text, re.S | re.M)
        assert section, f"docs/design.md has no '### {table}' section"
        listed = re.findall(r"^\| `([a-z_]+)` \|", section.group(1), re.M)
        assert listed == [name for name, _ in columns], (
            f"docs/design.md's {table} table lists {listed}, the code has "
            f"{[name for name, _ in columns]}"
        )


def _requirement_names(specs: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", s, maxsplit=1)[0].lower() for s in specs}


def test_every_dependency_says_why() -> None:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is Python 3.11+")
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = _requirement_names(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        names |= _requirement_names(extra)
    text = (ROOT / "docs" / "dependencies.md").read_text(encoding="utf-8").lower()
    missing = sorted(n for n in names if not re.search(rf"\*\*[^*]*\b{re.escape(n)}\b", text))
    assert not missing, f"docs/dependencies.md does not say why these are needed: {missing}"


def test_readme_is_a_short_guide_with_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) <= 16_000, "README.md is over ~15 KB: move details into docs/"
    assert "make quickstart" in text and "make test" in text
    assert "## Contents" in text


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_relative_links_in_the_docs_lead_somewhere() -> None:
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "bench" / "README.md",
             *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and dest.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken
