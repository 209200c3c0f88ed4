"""Where `--model MODULE:FUNCTION` is imported from: a src/ layout and the package folders the
project's pyproject.toml names, read and never run (training/code_roots.py), and the one line a
module not found there gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from mgpu_doctor.model.user_model import ModelObservation, ModelRequest
from mgpu_doctor.training.code_roots import MAX_ROOTS, code_roots
from mgpu_doctor.training.observed import model_outcome


def project(tmp_path: Path, pyproject: str, *folders: str) -> Path:
    for folder in folders:
        (tmp_path / folder).mkdir(parents=True)
    if pyproject:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


def roots(path: Path) -> list[tuple[str, str]]:
    return [(str(r.path.relative_to(path.resolve())), r.source) for r in code_roots(path)]


def test_a_src_layout_is_found_without_a_pyproject(tmp_path):
    assert roots(project(tmp_path, "", "src/pkg")) == [("src", "a src/ layout")]
    assert roots(project(tmp_path / "flat", "", "pkg")) == []  # the working directory is on the path already


@pytest.mark.parametrize(("pyproject", "folders", "expected"), [
    ('[tool.setuptools]\npackage-dir = {"" = "lib"}\n', ("lib/pkg",),
     [("lib", "pyproject.toml [tool.setuptools] package-dir")]),
    ('[tool.setuptools]\npackage-dir = {"pkg" = "code/pkg", "other" = "renamed"}\n', ("code/pkg", "renamed"),
     [("code", "pyproject.toml [tool.setuptools] package-dir")]),  # a renamed folder cannot be imported by name
    ('[tool.setuptools.packages.find]\nwhere = ["python", "missing"]\n', ("python/pkg",),
     [("python", "pyproject.toml [tool.setuptools] packages.find where")]),
    ('[tool.hatch.build.targets.wheel]\npackages = ["source/pkg"]\n', ("source/pkg", "src"),
     [("source", "pyproject.toml [tool.hatch.build.targets.wheel] packages"), ("src", "a src/ layout")]),
    ('[tool.hatch.build]\nsources = {"py" = ""}\n', ("py/pkg",), [("py", "pyproject.toml [tool.hatch.build] sources")]),
    ('[tool.poetry]\npackages = [{include = "pkg", from = "lib"}]\n', ("lib/pkg",),
     [("lib", "pyproject.toml [tool.poetry] packages from")]),
    ('[tool.pdm.build]\npackage-dir = "src"\n', ("src/pkg",), [("src", "pyproject.toml [tool.pdm.build] package-dir")]),
])
def test_the_package_folders_pyproject_names_come_first(tmp_path, pyproject, folders, expected):
    assert roots(project(tmp_path, pyproject, *folders)) == expected


@pytest.mark.parametrize("pyproject", ["not = [valid toml", "tool = 3\n", "[tool.setuptools]\npackage-dir = 5\n",
                                       '[tool.setuptools.packages.find]\nwhere = [1, ""]\n'])
def test_a_pyproject_that_cannot_be_read_adds_nothing_and_raises_nothing(tmp_path, pyproject):
    assert roots(project(tmp_path, pyproject, "src")) == [("src", "a src/ layout")]


def test_the_roots_are_bounded(tmp_path):
    names = [f"d{i}" for i in range(MAX_ROOTS + 4)]
    where = ", ".join(f'"{n}"' for n in names)
    assert len(code_roots(project(tmp_path, f"[tool.setuptools.packages.find]\nwhere = [{where}]\n", *names))) \
        == MAX_ROOTS


def observation(missing: str) -> ModelObservation:
    request = ModelRequest("pkg.models:build", searched=("/p/src (a src/ layout)", "/p (the working directory)"))
    return ModelObservation(request, "import", error_type="ModuleNotFoundError",
                            error_message=f"No module named '{missing}'", missing_module=missing)


def test_a_module_not_found_is_one_line_naming_what_to_pass():
    [finding] = model_outcome(observation("pkg")).findings
    assert finding.code == "user-model.import-failed"
    assert finding.title == ("Your model pkg.models:build: no module named 'pkg' where the child looked: "
                             "pass --model-path DIR, the folder that holds pkg/ (or pkg.py)")
    assert "  /p/src (a src/ layout)" in finding.evidence
    # a module the user's module imports is not the user's to point at: the plain import failure
    [other] = model_outcome(observation("tensorflow_addons")).findings
    assert "--model-path DIR, the folder" not in other.title and "importing the module" in other.title
