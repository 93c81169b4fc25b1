"""Every public module of evalkit (no leading underscore) and every subpackage declares its
public names in ``__all__``, and each of them exists there: the surface is written down, not
guessed from the code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "evalkit"
MODULES = sorted(p for p in PACKAGE.rglob("*.py")
                 if not {"conf", "data"} & set(p.relative_to(PACKAGE).parts)
                 and (p.name == "__init__.py" or not p.name.startswith("_")))


def _defined(tree: ast.Module, path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if path.name == "__init__.py":  # a package's __all__ may name its modules
        names.update(p.stem if p.is_file() else p.name for p in path.parent.iterdir())
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_public_module_declares_its_names(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    declared = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
    assert declared, f"{path.relative_to(PACKAGE)} has no __all__"
    names = ast.literal_eval(declared[0])
    missing = set(names) - _defined(tree, path)
    assert not missing, f"{path.relative_to(PACKAGE)}: __all__ names {sorted(missing)}"
