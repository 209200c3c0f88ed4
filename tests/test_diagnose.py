"""`check` and `report` tie facts, smoke runs, the known-issue matrix and the gates together.

Smoke runs recorded in a saved report are replayed by `check --from` (no TensorFlow needed):
judged by today's rules and matrix, and counted by `--require-layers`.
"""

from __future__ import annotations

import json

from mgpu_doctor.cli import main
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.model.smoke_runs import SmokeRun
from tests.scenarios import path_of

GRU_HANG = SmokeRun("gru", "cudnn", 2, "gpu", "even", "hang", global_batch=64, samples=256, epochs=2,
                    error_message="no step finished for 120 s", stacks="Thread 0x1:\n  File \"x.py\", line 3")
DENSE_OK = SmokeRun("dense", "", 2, "gpu", "even", "ok", global_batch=64, samples=256, epochs=2,
                    losses=[0.9, 0.5], median_step_s=0.01, samples_per_s=6400.0)


def saved_report(capsys, tmp_path, runs: list[SmokeRun]):
    assert main(["check", "--from", str(path_of("healthy-8gpu-nvlink")), "--format", "json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    data["smoke_runs"] = [to_jsonable(r) for r in runs]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    return path


def test_replayed_smoke_runs_are_judged_and_matched(capsys, tmp_path):
    path = saved_report(capsys, tmp_path, [GRU_HANG, DENSE_OK])
    code = main(["check", "--from", str(path), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    checks = {c["name"]: c for c in data["checks"]}
    hang = checks["smoke/gru-cudnn/2xgpu/even/b64"]
    assert hang["status"] == "failed"
    codes = [f["code"] for f in hang["findings"]]
    assert codes[0] == "smoke.gru.hang"
    # TF 2.21 has no known GRU hang: the verdict says so and how to report it.
    assert any(c.startswith("smoke.not-in-matrix.gru-cudnn-2gpu-even") for c in codes)
    assert checks["smoke/dense/2xgpu/even/b64"]["status"] == "passed"
    assert [r["status"] for r in data["smoke_runs"]] == ["hang", "ok"]
    assert any("replayed from the file" in n for n in data["notes"])
    # nothing ran here at any level; the file's own level is told beside the replay
    assert data["level"] == ""


def test_the_replay_names_the_level_the_file_ran_at(capsys, tmp_path):
    path = saved_report(capsys, tmp_path, [DENSE_OK])
    data = json.loads(path.read_text())
    assert data["level"] == ""  # `check --from` runs no level
    for level, said in (("standard", "(level standard)"), ("x" * 200, "characters)")):
        path.write_text(json.dumps({**data, "level": level}))
        main(["check", "--from", str(path), "--format", "json"])
        notes = json.loads(capsys.readouterr().out)["notes"]
        assert any(n.startswith("1 smoke run(s) replayed from the file (level ") and said in n
                   for n in notes), notes


def test_require_layers_counts_the_smoke_runs(capsys, tmp_path):
    path = saved_report(capsys, tmp_path, [GRU_HANG, DENSE_OK])
    assert main(["check", "--from", str(path), "--require-layers", "dense", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    gate = {c["name"]: c for c in data["checks"]}["require-layers"]
    assert gate["status"] == "passed" and gate["findings"][0]["code"] == "require.layers-met"
    main(["check", "--from", str(path), "--require-layers", "gru,lstm", "--format", "json"])
    gate = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}["require-layers"]
    assert {f["code"] for f in gate["findings"]} == {"require.layers-failed", "require.layers-unverified"}
    assert "gru: failed" in gate["findings"][0]["evidence"] + gate["findings"][1]["evidence"]


def test_without_smoke_runs_required_layers_are_not_passed(capsys):
    code = main(["check", "--from", str(path_of("healthy-8gpu-nvlink")), "--require-layers", "dense",
                 "--format", "json"])
    gate = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}["require-layers"]
    assert code == 1 and gate["findings"][0]["code"] == "require.layers-unverified"


def test_support_report_shows_the_smoke_runs_and_replays_them(capsys, tmp_path):
    path = saved_report(capsys, tmp_path, [GRU_HANG, DENSE_OK])
    out = tmp_path / "bug.md"
    assert main(["report", "--from", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert "## Smoke trainings" in text and "| gru-cudnn " in text and "hang" in text
    capsys.readouterr()
    assert main(["check", "--from", str(out), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [r["layer"] for r in data["smoke_runs"]] == ["gru", "dense"]


def test_broken_smoke_runs_in_a_saved_report_are_bad_input(capsys, tmp_path):
    path = saved_report(capsys, tmp_path, [DENSE_OK])
    data = json.loads(path.read_text())
    data["smoke_runs"][0]["devices"] = "two"
    path.write_text(json.dumps(data))
    assert main(["check", "--from", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "smoke_runs[0].devices" in err


def test_a_replay_shows_every_check_the_report_showed(capsys, tmp_path):
    """What the replay cannot run again (the user's model, built on the recording machine; the gates
    the recording run asked for) is shown as recorded; a gate asked for again runs again."""
    recording = ["--quick", "--model", "mypkg.models:build", "--require-gpus", "2", "--require-tensorflow", ">=2"]
    report = tmp_path / "report.md"
    main(["report", "-o", str(report), *recording])
    main(["check", *recording, "--format", "json"])
    live = json.loads(capsys.readouterr().out)
    for recorded in (report, tmp_path / "report.json"):
        (tmp_path / "report.json").write_text(json.dumps(live))
        main(["check", "--from", str(recorded), "--format", "json"])
        replayed = json.loads(capsys.readouterr().out)
        assert [(c["name"], c["status"]) for c in replayed["checks"]] == [
            (c["name"], c["status"]) for c in live["checks"]], recorded.name
    assert {"model", "require-gpus", "require-tensorflow"} <= {c["name"] for c in replayed["checks"]}
    main(["check", "--from", str(recorded), "--require-gpus", "1", "--format", "json"])
    gates = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "require-gpus"]
    assert [g["title"] for g in gates] == ["At least 1 GPU(s) usable (--require-gpus)"]
