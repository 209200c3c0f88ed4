"""NumPy, protobuf, ml-dtypes and h5py against TensorFlow's own pins: from the pins table in a
`matrix query`, from the installed TensorFlow's metadata on a machine."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.checks.tensorflow_requires import applicable_pins, same_line_allowed
from mgpu_doctor.cli import main
from mgpu_doctor.diagnose import judge_snapshot
from mgpu_doctor.environment.readings import Origin, reading, resolved
from mgpu_doctor.matrix.compat_tables import bundled_tensorflow_requires_table
from mgpu_doctor.model.versions import parse_pin, requirement_name
from mgpu_doctor.record import replace
from tests.scenarios import healthy_8gpu_nvlink


def query(capsys, *terms: str) -> dict[str, str]:
    main(["matrix", "query", *terms, "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    return {f["code"]: f["severity"] for c in data["checks"] for f in c["findings"]}


@pytest.mark.parametrize("terms,severity", [
    # another major line than TensorFlow 2.15 pins (numpy<2.0.0): its import fails
    (["tensorflow==2.15.0", "numpy==2.1.0"], "error"),
    # the same line, below the floor (>=1.23.5): untested, pip refuses it
    (["tensorflow==2.15.0", "numpy==1.22.4"], "warning"),
    # protobuf 4.21.3 is excluded by name (!=4.21.3), 4.x is allowed
    (["tensorflow==2.15.0", "protobuf==4.21.3"], "warning"),
    (["tensorflow==2.15.0", "protobuf==5.26.1"], "error"),
    # ml-dtypes ~=0.2.0: 0.3 is another line (it removed float8_e4m3b11)
    (["tensorflow==2.15.0", "ml-dtypes==0.3.1"], "error"),
    (["tensorflow==2.7.3", "protobuf==4.21.0"], "error"),
])
def test_a_package_outside_tensorflows_pins(capsys, terms, severity):
    found = query(capsys, *terms)
    assert found.get("tensorflow-requires.out-of-range") == severity, found


@pytest.mark.parametrize("terms", [
    ["tensorflow==2.15.0", "numpy==1.26.4", "protobuf==4.25.3"],
    ["tensorflow==2.21.0", "numpy==2.1.3"],
    ["tensorflow==2.18.0", "numpy==1.26.4"],
])
def test_packages_within_the_pins_are_ok(capsys, terms):
    found = query(capsys, *terms)
    assert found.get("tensorflow-requires.ok") == "ok", found
    assert "tensorflow-requires.out-of-range" not in found


def test_numpy_2_with_a_tensorflow_that_does_not_cap_it_is_one_story(capsys):
    # TensorFlow 2.14 asks only numpy>=1.23.5, yet was compiled against NumPy 1 (tensorflow#102743):
    # the pins check and the known issue say the same
    found = query(capsys, "tensorflow==2.14.0", "numpy==2.3.4")
    assert found["tensorflow-requires.out-of-range"] == "error"
    assert "tensorflow-requires.ok" not in found
    assert found["known-issue.tf-before-218-numpy2-import-fails"] == "warning"


def test_without_the_packages_named_the_check_is_skipped(capsys):
    main(["matrix", "query", "tensorflow==2.15.0", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    check = next(c for c in data["checks"] if c["name"] == "tensorflow-requires")
    assert check["status"] == "skipped"


def test_pins_for_one_python_count_only_for_that_python():
    reqs = ('numpy<2.0.0,>=1.23.5; python_version <= "3.11"',
            'numpy<2.0.0,>=1.26.0; python_version >= "3.12"')
    py311 = resolved("python", [reading("3.11.9", Origin.QUERY)])
    py312 = resolved("python", [reading("3.12.3", Origin.QUERY)])
    unknown = resolved("python", [])
    assert [str(r.specifier) for r in applicable_pins(reqs, py311)["numpy"]] == ["<2.0.0,>=1.23.5"]
    assert [str(r.specifier) for r in applicable_pins(reqs, py312)["numpy"]] == ["<2.0.0,>=1.26.0"]
    assert len(applicable_pins(reqs, unknown)["numpy"]) == 2


@pytest.mark.parametrize("version,spec,allowed", [
    ("2.1.0", "<2.0.0,>=1.23.5", False),
    ("1.22.0", "<2.0.0,>=1.23.5", True),
    ("0.3.1", "~=0.2.0", False),
    ("0.2.5", "~=0.2.0", True),
    ("4.21.3", "!=4.21.3,<5,>=3.20.3", True),
    ("4.21.0", "<3.20,>=3.9.2", False),
])
def test_the_line_of_a_version(version, spec, allowed):
    pin = parse_pin(f"x{spec}")
    assert pin is not None
    assert same_line_allowed(Version(version), [pin]) is allowed


def test_on_a_machine_the_installed_tensorflows_own_metadata_decides():
    snap = healthy_8gpu_nvlink()
    packages = snap.packages
    requires = dict(packages.requires)
    requires["tensorflow"] = [line for line in requires["tensorflow"] if not line.startswith("numpy")] \
        + ["numpy<2.0.0,>=1.26.0"]
    snap = replace(snap, packages=replace(packages, requires=requires,
                                          versions={**packages.versions, "numpy": "2.1.3"}))
    report = judge_snapshot(snap, CHECKS, command="check", source="t")
    check = next(c for c in report.checks if c.name == "tensorflow-requires")
    finding = next(f for f in check.findings if f.code == "tensorflow-requires.out-of-range")
    assert finding.severity.value == "error"
    assert any("tensorflow's Requires-Dist" in line for line in finding.evidence), finding.evidence


def test_the_pins_table_has_every_release_with_numpy_pins():
    table = bundled_tensorflow_requires_table()
    listed = [Version(r.tensorflow) for r in table.releases]
    assert min(listed) <= Version("1.15.0") and max(listed) >= Version("2.21.0")
    for row in table.releases:
        names = {requirement_name(line) for line in row.requires}
        assert "numpy" in names, row
        assert row.source.startswith("https://pypi.org/project/tensorflow/")
