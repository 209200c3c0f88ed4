"""Finding codes: one scheme, every code declared, renamed codes still acknowledged."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from mgpu_doctor.checks import CHECKS, run_check
from mgpu_doctor.checks.base import Check
from mgpu_doctor.cli import main
from mgpu_doctor.code_table import all_declared, declared_codes
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.fleet.checks import FLEET_CHECKS
from mgpu_doctor.gate.requirements import GATE_CODES, Requirements, requirement_checks
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.codes import AREAS, CODE, RENAMED, canonical, is_declared, scheme_problem
from mgpu_doctor.model.findings import CheckStatus, Finding, Severity
from tests.scenarios import SCENARIOS, path_of

PACKAGE = Path(__file__).parent.parent / "mgpu_doctor"


def test_every_declared_code_follows_the_scheme():
    problems = [p for p in (scheme_problem(c) for c in all_declared()) if p]
    assert not problems, problems


def test_an_area_is_never_the_plural_of_another():
    assert not [a for a in AREAS if f"{a}s" in AREAS]


@pytest.mark.parametrize("code,problem", [
    ("gpus.none", "not an area"), ("gpu", "not AREA.CONDITION"), ("gpu.Mixed", "not AREA.CONDITION"),
    ("gpu.no_p2p", "not AREA.CONDITION"), ("gpu..mixed", "not AREA.CONDITION"), ("gpu.mixed-", "not AREA"),
])
def test_the_scheme_rejects(code, problem):
    assert problem in (scheme_problem(code) or "")


def test_every_registered_check_declares_its_codes():
    gates = requirement_checks(Requirements(gpus=1, tensorflow=">=2", layers=("gru",)), None)
    assert {c.name for c in gates} == set(GATE_CODES)
    for check in (*CHECKS, *FLEET_CHECKS, *gates):
        assert check.codes, f"{check.name} declares no finding codes"
        assert len(set(check.codes)) == len(check.codes), check.name


def test_every_check_section_is_declared():
    assert all(c.section is not None for c in CHECKS)


def _literal_codes(tree: ast.Module) -> set[tuple[int, str]]:
    """The code of every ``Finding(...)`` whose code is written in the call: a string, an f-string
    (each ``{...}`` as ``{}``, a local variable holding an f-string resolved), or a module constant."""
    constants = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)}

    def text(expr: ast.expr, local: dict[str, ast.expr]) -> list[str]:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [expr.value]
        if isinstance(expr, ast.IfExp):
            return text(expr.body, local) + text(expr.orelse, local)
        if isinstance(expr, ast.Name) and expr.id in local:
            return text(local[expr.id], local)
        if isinstance(expr, ast.Name) and expr.id in constants:
            return text(constants[expr.id], local)
        if isinstance(expr, ast.JoinedStr):
            parts = [""]
            for value in expr.values:
                if isinstance(value, ast.Constant):
                    parts = [p + str(value.value) for p in parts]
                else:
                    inner = value.value if isinstance(value, ast.FormattedValue) else value
                    filled = text(inner, local) if isinstance(inner, ast.Name) and inner.id in local else ["{}"]
                    parts = [p + f for p in parts for f in filled]
            return parts
        return []

    found = set()
    for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Module))]:
        local = {t.id: n.value for n in ast.walk(function) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Finding":
                code = next((k.value for k in node.keywords if k.arg == "code"),
                            node.args[0] if node.args else None)
                if code is not None:
                    found |= {(node.lineno, c) for c in text(code, local)}
    return found


def _source_code_matches(written: str, declared: tuple[str, ...]) -> bool:
    """A code as the source writes it ({} for what is filled in) against the declared ones
    (placeholders in upper case): some declared code must fit it."""
    if "{}" not in written:
        return is_declared(written, declared)
    pattern = re.compile(".+".join(re.escape(p) for p in written.split("{}")))
    return any(pattern.fullmatch(d) for d in declared)


def test_every_code_the_source_writes_is_declared():
    """Catches a code added to a check, a smoke rule or the fleet without declaring it, even
    where no test scenario makes that finding (the registry check below catches the rest)."""
    declared = all_declared()
    seen, undeclared = 0, []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "child_scripts" in path.parts:
            continue
        for line, code in sorted(_literal_codes(ast.parse(path.read_text(encoding="utf-8")))):
            seen += 1
            if not _source_code_matches(code, declared):
                undeclared.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {code}")
    assert seen > 100 and not undeclared, undeclared


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_code_a_scenario_gets_follows_the_scheme_and_is_declared(scenario, name):
    env = resolve(scenario(name))
    outcomes = [run_check(c, env) for c in CHECKS]
    assert not [o.findings[0].title for o in outcomes if o.status is CheckStatus.CRASHED]
    for finding in (f for o in outcomes for f in o.findings):
        assert CODE.fullmatch(finding.code) and scheme_problem(finding.code) is None, finding.code


def test_a_check_that_emits_an_undeclared_code_is_a_crash_naming_it():
    check = Check("demo", "Demo", lambda _s: [Finding("gpu.made-up", Severity.INFO, "x")], codes=("gpu.none",))
    outcome = run_check(check, None)
    assert outcome.status is CheckStatus.CRASHED and "gpu.made-up" in outcome.findings[0].title
    assert outcome.findings[0].code == "crash.demo"
    declared = Check("demo", "Demo", check.run, codes=("gpu.made-up",))
    assert run_check(declared, None).status is CheckStatus.INFO


def test_bundled_known_issue_ids_make_codes_of_the_scheme():
    matrix = load_matrix(bundled_matrix_dir())
    assert matrix.issues
    assert not [i.id for i in matrix.issues if scheme_problem(f"known-issue.{i.id}")]
    assert not [i.id for i in matrix.issues if scheme_problem(f"smoke.known-issue.{i.id}")]


def test_renamed_codes_lead_to_declared_codes_and_are_not_declared_themselves():
    declared = all_declared()
    for old, new in RENAMED.items():
        assert canonical(old) == new and is_declared(new, declared) and not is_declared(old, declared)
    assert canonical("gpu-ecc.crashed") == "crash.gpu-ecc"
    assert canonical("smoke.not-in-matrix.gru-cudnn-2gpu-uneven_final_batch") == \
        "smoke.not-in-matrix.gru-cudnn-2gpu-uneven-final-batch"
    assert canonical("gpu.ecc-uncorrected") == "gpu.ecc-uncorrected"
    rows = {r.code: r for r in declared_codes()}
    assert rows["gpu.none"].renamed_from == ("gpus.none",) and rows["crash.CHECK"].renamed_from


def _gate(tmp_path, capsys, ack_code: str | None) -> tuple[int, dict]:
    argv = ["check", "--from", str(path_of("driver-without-gpus")), "--format", "json", "--fail-on", "warning"]
    if ack_code is not None:
        ack = tmp_path / "acks.toml"
        ack.write_text(f'[[acknowledge]]\ncode = "{ack_code}"\nreason = "CPU runner"\nexpires = 2099-01-01\n')
        argv += ["--ack", str(ack)]
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_an_acknowledge_file_naming_a_renamed_code_still_holds_and_says_its_new_name(tmp_path, capsys):
    unacknowledged, _ = _gate(tmp_path, capsys, None)
    assert unacknowledged == 1  # gpu.none, a warning, fails the gate
    code, report = _gate(tmp_path, capsys, "gpus.none")
    finding = next(f for c in report["checks"] for f in c["findings"] if f["code"] == "gpu.none")
    assert code == 0 and finding["acknowledgement"]["reason"] == "CPU runner"
    assert any("'gpus.none', now called 'gpu.none'" in n for n in report["notes"])
    current, report = _gate(tmp_path, capsys, "gpu.none")
    assert current == 0 and not any("now called" in n for n in report["notes"])


def test_is_declared_reads_a_placeholder_as_one_or_more_whole_segments():
    """Segment by segment it decides what the pattern of each declared code (a placeholder as
    ``.+`` between escaped segments) decided, for every declared code against codes of 1-4 extra
    segments, renamed codes and near misses."""
    def by_pattern(code: str, declared: str) -> bool:
        parts = [".+" if re.fullmatch(r"[A-Z][A-Z_]*", s) else re.escape(s) for s in declared.split(".")]
        return re.fullmatch(r"\.".join(parts), code) is not None

    declared = sorted(set(all_declared()))
    fills = ["lstm", "tf-1234-gru-hang", "a.b", "x.y.z"]
    codes = {re.sub(r"\b[A-Z][A-Z_]*\b", fill, d) for d in declared for fill in fills}
    codes |= {c + ".extra" for c in list(codes)[:200]} | {c.rsplit(".", 1)[0] for c in declared}
    codes |= set(RENAMED) | set(RENAMED.values()) | {"known-issue.", "smoke..hang", ".x"}
    assert any("." in c and re.search(r"[A-Z]", d) for c in codes for d in declared)
    for code in sorted(codes):
        for one in declared:
            assert is_declared(code, [one]) == by_pattern(code, one), (code, one)
