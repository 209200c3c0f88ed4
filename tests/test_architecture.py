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


def imports_of(path: Path, *, type_only: bool = False) -> set[str]:
    """The top-level names under mgpu_doctor that a module imports at run time (imports made only
    for type checking name a type, not a dependency; ``type_only=True`` counts them too).

    A dotted name in a string ("mgpu_doctor.fleet.compare") counts as an import where the module
    imports by name (importlib.import_module, __import__): hiding an import in a string does not
    take the dependency away."""
    return {name.split(".")[1] for name in imported_modules(path, type_only=type_only)
            if name.startswith("mgpu_doctor.") and name.split(".")[1] != "__version__"}


def imported_modules(path: Path, *, type_only: bool = False) -> set[str]:
    """Every module name a module imports, dotted as written (``from a import b`` gives ``a`` and
    ``a.b``), with the dotted names in strings of a module that imports by name."""
    tree = ast.parse(path.read_text())
    skipped = set() if type_only else {
        id(n) for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    source = ast.unparse(tree)
    if "import_module" in source or "__import__" in source:
        found |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and re.fullmatch(r"mgpu_doctor(\.\w+)+", n.value)}
    return found


def folder_import_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same folder it imports (anywhere in it, a function's body
    included). ``package`` is the folder's dotted name; "" for scripts that import their siblings
    by bare name (child_scripts run from their folder, in the interpreter being diagnosed)."""
    modules = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        prefix = f"{package}." if package else ""
        names = {n[len(prefix):] for n in imported_modules(path) if n.startswith(prefix)}
        graph[path.stem] = {n for n in names if n in modules and n != path.stem}
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as a path (its first node repeated at the end), [] when none."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return []
        for dep in sorted(graph.get(node, ())):
            if found := visit(dep, path + [node]):
                return found
        done.add(node)
        return []

    for start in sorted(graph):
        if found := visit(start, []):
            return found
    return []


# Folders above the data layer: a module of model/ names none of them, not even for type checking.
ABOVE_MODEL = ("checks", "cli", "diagnose", "drift", "environment", "fleet", "gate", "hang", "matrix",
               "multiworker", "pasted", "probes", "renderers", "smoke", "training")
# The command line parses, calls the pipeline (diagnose.py and its siblings) and renders: it gathers
# nothing itself, and takes from checks/ only the registry (its __init__), never a check's module.
NOT_FOR_THE_CLI = ("probes",)


def model_violations(root: Path) -> set[str]:
    return {f"{path.relative_to(root)} names {name}" for path in (root / "model").rglob("*.py")
            for name in imports_of(path, type_only=True) & set(ABOVE_MODEL)}


def cli_violations(root: Path) -> set[str]:
    found = set()
    for path in (root / "cli").rglob("*.py"):
        found |= {f"{path.relative_to(root)} imports {name}"
                  for name in imports_of(path, type_only=True) & set(NOT_FOR_THE_CLI)}
        found |= {f"{path.relative_to(root)} imports {'.'.join(name.split('.')[:3])}"
                  for name in imported_modules(path, type_only=True) if name.startswith("mgpu_doctor.checks.")
                  and (root / "checks" / f"{name.split('.')[2]}.py").is_file()}
    return found


def folder_cycles(root: Path) -> dict[str, list[str]]:
    """Each folder of the package with a cycle of imports between its own modules."""
    cycles = {}
    for folder in sorted({p.parent for p in root.rglob("*.py")}):
        package = "" if not (folder / "__init__.py").is_file() else \
            ".".join(("mgpu_doctor", *folder.relative_to(root).parts))
        if cycle := import_cycle(folder_import_graph(folder, package)):
            cycles[str(folder.relative_to(root))] = cycle
    return cycles


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


def test_the_top_level_holds_few_modules_and_errors_and_record_import_nothing():
    modules = [p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules
    assert imports_of(ROOT / "errors.py") == set()
    assert imports_of(ROOT / "record.py") == set()  # every package may import it


PIPELINES = ("diagnose.py", "smoke_pipeline.py", "gathering.py")  # what the command line calls


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_the_pipeline_imports_neither_the_command_line_nor_the_renderers(pipeline):
    assert not imports_of(ROOT / pipeline) & {"cli", "renderers"}


def test_child_scripts_import_nothing_of_the_package():
    # They run in the interpreter being diagnosed, where mgpu-doctor is not installed.
    for path in (ROOT / "child_scripts").glob("*.py"):
        tree = ast.parse(path.read_text())
        modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        modules += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in modules if m.split(".")[0] == "mgpu_doctor"], path.name


def test_the_data_layer_names_no_package_above_it():
    assert not model_violations(ROOT)


def test_the_command_line_imports_no_probe():
    assert not cli_violations(ROOT)


def test_no_folder_has_an_import_cycle_between_its_modules():
    assert folder_cycles(ROOT) == {}


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "mgpu_doctor" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "mgpu_doctor"


@pytest.mark.parametrize("text", [
    "from mgpu_doctor.fleet.compare import Fleet\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mgpu_doctor.fleet.compare import Fleet\n",
    "import importlib\nLAZY = {'Fleet': 'mgpu_doctor.fleet.compare'}\n"
    "def f(n):\n    return importlib.import_module(LAZY[n])\n",
    "def f():\n    return __import__('mgpu_doctor.drift.compare')\n",
])
def test_the_data_layer_rule_sees_a_planted_import_of_fleet(tmp_path, text):
    root = _plant(tmp_path, {"model/__init__.py": "", "model/report.py": text})
    assert model_violations(root)


def test_the_data_layer_rule_lets_model_import_model(tmp_path):
    root = _plant(tmp_path, {"model/__init__.py": "", "model/report.py":
                             "import importlib\nfrom mgpu_doctor.model.snapshot import Snapshot\n"
                             "X = importlib.import_module('mgpu_doctor.model.fleet')\n"})
    assert not model_violations(root)


def test_the_command_line_rule_sees_a_planted_probe_import(tmp_path):
    root = _plant(tmp_path, {"cli/__init__.py": "", "cli/devices.py":
                             "def run(args):\n    from mgpu_doctor.probes.nvml import gather_nvml\n"
                             "    return gather_nvml()\n"})
    assert cli_violations(root) == {"cli/devices.py imports probes"}


def test_the_command_line_rule_sees_a_check_module_and_lets_the_registry_pass(tmp_path):
    root = _plant(tmp_path, {"checks/__init__.py": "", "checks/packages.py": "", "cli/__init__.py": "",
                             "cli/smoke.py": "from mgpu_doctor.checks import CHECKS, run_check\n",
                             "cli/workers.py": "from mgpu_doctor.checks.packages import check_keras\n"})
    assert cli_violations(root) == {"cli/workers.py imports mgpu_doctor.checks.packages"}


@pytest.mark.parametrize("files", [
    {"smoke/__init__.py": "", "smoke/section.py": "def f():\n    from mgpu_doctor.smoke.jax_section import g\n",
     "smoke/jax_section.py": "from mgpu_doctor.smoke import section\n"},
    {"child_scripts/_a.py": "from _b import x\n", "child_scripts/_b.py": "def f():\n    import _c\n",
     "child_scripts/_c.py": "import _a\n"},
])
def test_the_cycle_rule_sees_a_planted_cycle(tmp_path, files):
    root = _plant(tmp_path, files)
    folder = next(iter(files)).split("/")[0]
    cycle = folder_cycles(root)[folder]
    assert cycle[0] == cycle[-1] and len(cycle) >= 3


def test_the_cycle_rule_passes_a_folder_without_one(tmp_path):
    root = _plant(tmp_path, {"smoke/__init__.py": "", "smoke/a.py": "from mgpu_doctor.smoke import b\n",
                             "smoke/b.py": "import json\nfrom mgpu_doctor.model import c\n"})
    assert folder_cycles(root) == {}


def test_data_types_are_records():
    """Data types are declared ``@record`` (mgpu_doctor/record.py), never with ``dataclasses``:
    ``@dataclass(frozen=True)`` compiles six methods per class at import, and importing
    ``dataclasses`` imports ``inspect``; at 110 types that was half of ``check --quick``'s run."""
    importing = sorted(str(path.relative_to(ROOT)) for path in ROOT.rglob("*.py")
                       if "child_scripts" not in path.parts
                       and any(m == "dataclasses" or m.startswith("dataclasses.") for m in imported_modules(path)))
    assert not importing, importing
