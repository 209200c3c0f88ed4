"""The folders show the architecture: each package's ``__init__`` docstring says which packages it
may import ("May import: a, b."), and this module holds every module of it to that line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1] / "mgpu_doctor"
PACKAGES = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
MAX_TOP_LEVEL_MODULES = 8


def allowed_imports(package: str) -> set[str] | None:
    """The packages named on the "May import:" line of the package's docstring; None: every one."""
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text())) or ""
    match = re.search(r"^May import: (.+?)\.(?:\s|$)", doc, re.M)
    assert match, f"mgpu_doctor/{package}/__init__.py: its docstring states no 'May import:' rule"
    if match.group(1).startswith("every package"):
        return None
    return {re.sub(r"\s*\(.*", "", name).strip() for name in match.group(1).split(",")}


def imports_of(path: Path) -> set[str]:
    """The top-level names under mgpu_doctor that a module imports at run time (imports made only
    for type checking name a type, not a dependency)."""
    tree = ast.parse(path.read_text())
    type_only = {id(n) for node in ast.walk(tree)
                 if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mgpu_doctor":
            names = [f"{node.module}.{a.name}" for a in node.names] if node.module == "mgpu_doctor" \
                else [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n.split(".")[1] for n in names if n.startswith("mgpu_doctor.") and n.split(".")[1] != "__version__"}
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_only_what_its_docstring_allows(package: str):
    allowed = allowed_imports(package)
    if allowed is None:
        return
    unknown = allowed - set(PACKAGES) - {p.stem for p in ROOT.glob("*.py")}
    assert not unknown, f"{package}: the rule names what does not exist: {unknown}"
    wrong = {f"{path.relative_to(ROOT)} imports {name}"
             for path in (ROOT / package).rglob("*.py")
             for name in imports_of(path) - allowed - {package}}
    assert not wrong, sorted(wrong)


def test_the_rules_form_layers_without_a_cycle():
    rules = {p: allowed_imports(p) for p in PACKAGES}
    graph = {p: {d for d in (r or set()) if d in rules} for p, r in rules.items() if r is not None}
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"import rules form a cycle: {' -> '.join(path + (node,))}"
        if node in done:
            return
        for dep in graph.get(node, ()):
            visit(dep, path + (node,))
        done.add(node)

    for package in graph:
        visit(package, ())


def test_the_top_level_holds_few_modules_and_errors_imports_nothing():
    modules = [p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules
    assert imports_of(ROOT / "errors.py") == set()


def test_the_pipeline_imports_neither_the_command_line_nor_the_renderers():
    assert not imports_of(ROOT / "diagnose.py") & {"cli", "renderers"}


def test_child_scripts_import_nothing_of_the_package():
    # They run in the interpreter being diagnosed, where mgpu-doctor is not installed.
    for path in (ROOT / "child_scripts").glob("*.py"):
        tree = ast.parse(path.read_text())
        modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        modules += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in modules if m.split(".")[0] == "mgpu_doctor"], path.name
