"""The training profile: declared in the project's files and the options, matched against the known
issues (a condition it states makes a warning, one it rules out disappears), replayed by
`check --from`, and the conditional known issues grouped by the fact that would decide them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.model.training import TrainingFacts, TrainingProfile
from mgpu_doctor.training.declared import ProfileError, declared_profile
from tests.scenarios import path_of

SCHEMA = json.loads((Path(__file__).parents[1] / "mgpu_doctor/schemas/report.schema.json").read_text())
HEALTHY = str(path_of("healthy-8gpu-nvlink"))  # TensorFlow 2.21, Keras 3.15, 8 GPUs
BN_SAVED = "known-issue.tf-46488-batchnorm-replica-statistics-saved"
AFTER_SYNC_BN = "known-issue.tf-62790-collectives-after-syncbn-model"
STATEFUL_LOOP = "known-issue.keras-23085-custom-loop-stateful-optimizer-placeholder"
THE_THREE = (BN_SAVED, AFTER_SYNC_BN, STATEFUL_LOOP)


def check_json(capsys, *argv: str) -> dict:
    code = main(["check", "--from", HEALTHY, "--format", "json", *argv])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    data = json.loads(out)
    jsonschema.validate(data, SCHEMA)
    return data


def known(data: dict) -> dict[str, dict]:
    check = next(c for c in data["checks"] if c["name"] == "known-issues")
    return {f["code"]: f for f in check["findings"]}


def pyproject(tmp_path: Path, monkeypatch, body: str) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "trainer"\n\n[tool.mgpu-doctor.training]\n'
                                             + body)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(("body", "warned"), [
    ('strategy = "mirrored"\nlayers = ["batchnorm"]\nusage = ["save_model"]\n', BN_SAVED),
    ('strategy = "mirrored"\nlayers = ["sync_batchnorm"]\nusage = ["several_models"]\n', AFTER_SYNC_BN),
    ('strategy = "mirrored"\nusage = ["custom_training_loop"]\n', STATEFUL_LOOP),
])
def test_a_profile_that_states_the_condition_makes_the_entry_a_warning(capsys, tmp_path, monkeypatch,
                                                                        body, warned):
    pyproject(tmp_path, monkeypatch, body)
    data = check_json(capsys)
    found = known(data)
    assert found[warned]["severity"] == "warning"
    assert found[warned]["condition"] is None
    assert any("declared in pyproject.toml: [tool.mgpu-doctor.training] strategy" in e
               for e in found[warned]["evidence"])
    # the other two need a layer this whole list leaves out (ruled out, gone) or a usage it does not
    # name: a typed usage list is partial (issue 36), so that one is "applies if you ..." (info)
    others = [c for c in THE_THREE if c != warned and c in found]
    assert all(found[c]["severity"] == "info" and found[c]["condition"]["key"] == "usage" for c in others)
    assert data["training"]["declared"]["strategy"] == "mirrored"
    assert data["training"]["declared_from"]["strategy"] == "pyproject.toml: [tool.mgpu-doctor.training] strategy"


def test_without_a_profile_the_three_stay_grouped_info(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = check_json(capsys)
    found = known(data)
    for code in THE_THREE:
        assert found[code]["severity"] == "info"
        assert found[code]["condition"]["training"] is True
    grouped = {c for g in data["conditional"] for c in g["codes"]}
    assert set(THE_THREE) <= grouped
    # each entry in exactly one group, decided by its rarest unknown fact (a usage before a strategy)
    assert sorted(c for g in data["conditional"] for c in g["codes"]) == sorted(grouped)
    by_code = {c: (g["key"], g["wanted"], g["hint"]) for g in data["conditional"] for c in g["codes"]}
    assert by_code[BN_SAVED] == ("usage", ["save_model"], "--usage save_model")
    assert by_code[STATEFUL_LOOP] == ("usage", ["custom_training_loop"], "--usage custom_training_loop")
    assert data["training"]["unknown"] == ["strategy", "layers", "usage", "gpus", "workers", "backend",
                                           "scenario"]


def test_the_human_check_groups_what_depends_on_the_training(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main(["check", "--from", HEALTHY])
    out = capsys.readouterr().out
    # one line per deciding fact (how many entries it decides grows with the matrix)
    assert re.search(r"^    i \d+( more)? apply depending on how you train: --usage ", out, re.M), out
    assert "Known issue for these versions" not in out  # each one is behind its group line
    main(["check", "--from", HEALTHY, "-v"])
    verbose = capsys.readouterr().out
    assert "\n      1 applies if you save the distributed model (model.save, tf.saved_model.save):" in verbose
    flat = " ".join(verbose.split())
    assert ("1 applies if you save the distributed model (model.save, tf.saved_model.save): --usage save_model "
            "i Known issue for these versions: A model with BatchNormalization") in flat
    assert "Training: declared: nothing; observed: nothing; unknown: strategy, layers, usage" in verbose


def test_an_option_wins_over_the_file_and_the_report_says_where_each_fact_came_from(
        capsys, tmp_path, monkeypatch):
    pyproject(tmp_path, monkeypatch, 'strategy = "multi_worker_mirrored"\nusage = ["save_model"]\n')
    (tmp_path / ".mgpu-doctor.toml").write_text('[training]\nlayers = ["batchnorm"]\n')
    data = check_json(capsys, "--strategy", "mirrored")
    assert data["training"]["declared"] == {"strategy": "mirrored", "layers": ["batchnorm"],
                                            "usage": ["save_model"], "gpus": None, "workers": None,
                                            "backend": None, "scenario": None}
    assert data["training"]["declared_from"] == {
        "strategy": "--strategy", "layers": ".mgpu-doctor.toml: [training] layers",
        "usage": "pyproject.toml: [tool.mgpu-doctor.training] usage"}
    assert known(data)[BN_SAVED]["severity"] == "warning"


def test_check_from_a_report_replays_its_profile(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = check_json(capsys, "--strategy", "mirrored", "--usage", "custom_training_loop")
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(data))
    code = main(["check", "--from", str(saved), "--format", "json"])
    replayed = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    assert replayed["training"]["declared"]["usage"] == ["custom_training_loop"]
    assert known(replayed)[STATEFUL_LOOP]["severity"] == "warning"
    # a key declared now wins over the recorded one; the others stay
    main(["check", "--from", str(saved), "--format", "json", "--usage", "save_model",
          "--model-layers", "batchnorm"])
    again = json.loads(capsys.readouterr().out)
    assert again["training"]["declared"]["strategy"] == "mirrored"
    assert known(again)[BN_SAVED]["severity"] == "warning"
    assert known(again)[STATEFUL_LOOP]["severity"] == "info"  # custom_training_loop no longer named: unknown
    # and through the Markdown bug report
    main(["report", "--from", str(saved), "-o", str(tmp_path / "report.md")])
    capsys.readouterr()
    text = (tmp_path / "report.md").read_text()
    assert "## Training" in text and "| declared | usage custom_training_loop (--usage" in text
    main(["check", "--from", str(tmp_path / "report.md"), "--format", "json"])
    assert known(json.loads(capsys.readouterr().out))[STATEFUL_LOOP]["severity"] == "warning"


def test_a_recorded_profile_is_checked_like_a_file(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = check_json(capsys, "--usage", "save_model")
    for bad, said in (({"usage": ["not_a_word"]}, "report.training.declared.usage: 'not_a_word' is not a word of usage"),
                      ({"usage": "save_model"}, "report.training.declared.usage: expected a list"),
                      ({"gpus": 0}, "report.training.declared.gpus: 0 is not a number of gpus")):
        data["training"]["declared"] = bad
        (tmp_path / "bad.json").write_text(json.dumps(data))
        assert main(["check", "--from", str(tmp_path / "bad.json")]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(("body", "said"), [
    # a close word is named; a long list is not printed whole on one line
    ('usage = ["save_modle"]', "pyproject.toml: [tool.mgpu-doctor.training] usage: 'save_modle' is not "
                               "a word of usage; did you mean save_model"),
    ('strategy = "mirored"', "[tool.mgpu-doctor.training] strategy: 'mirored' is not a word of strategy; "
                             "did you mean mirrored?"),
    ('strategy = "xyz"', "[tool.mgpu-doctor.training] strategy: 'xyz' is not a word of strategy; accepted: "
                         "mirrored, "),
    ('gpus = 0', "[tool.mgpu-doctor.training] gpus: 0 is not a number of gpus"),
    ('gpus = "²"', "[tool.mgpu-doctor.training] gpus: '²' is not a number of gpus"),  # isdigit, not int
    ('layers = "gru"\nbatch = 4', "[tool.mgpu-doctor.training] batch: unknown key; the keys are strategy, "),
    ('layers = [1]', "[tool.mgpu-doctor.training] layers: 1 is not a word; accepted: dense, "),
    ('usage = []', "[tool.mgpu-doctor.training] usage: names no word; accepted: "),
])
def test_a_bad_value_in_the_file_is_one_line_naming_file_key_and_words(capsys, tmp_path, monkeypatch,
                                                                       body, said):
    pyproject(tmp_path, monkeypatch, body + "\n")
    assert main(["check", "--from", HEALTHY]) == 2
    err = capsys.readouterr().err
    assert said in err and str(tmp_path / "pyproject.toml") in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_bad_option_value_names_the_option(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["matrix", "query", "tensorflow==2.0.0", "--usage", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mgpu-doctor: error: --usage: 'nope' is not a word of usage (`mgpu-doctor check "
                          "--help` lists all ")
    assert main(["matrix", "query", "tensorflow==2.0.0", "usage=save_model", "--usage", "save_model"]) == 2
    assert "usage given twice" in capsys.readouterr().err
    (tmp_path / ".mgpu-doctor.toml").write_text("training = 3\n")
    assert main(["check", "--from", HEALTHY]) == 2
    assert "[training] must be a table of keys" in capsys.readouterr().err


def test_the_training_table_does_not_upset_the_acknowledge_file(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".mgpu-doctor.toml").write_text(
        '[training]\nstrategy = "mirrored"\nusage = ["custom_training_loop"]\n\n[[acknowledge]]\n'
        f'known_issue = "{STATEFUL_LOOP.removeprefix("known-issue.")}"\nreason = "plain SGD"\n'
        'expires = 2999-12-31\n')
    assert main(["check", "--from", HEALTHY, "--fail-on", "warning", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert known(data)[STATEFUL_LOOP]["acknowledgement"]["reason"] == "plain SGD"


def test_matrix_query_fits_on_one_screen_with_every_entry_reachable(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["matrix", "query", "tensorflow==2.0.0", "gpus=2", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA)
    # every conditional entry is in a group; the entries last reported on older releases are one
    # line of their own, which names each (-v)
    info = {f["code"] for f in data["checks"][-1]["findings"] if f["severity"] == "info"}
    grouped = [c for g in data["conditional"] for c in g["codes"]]
    assert len(grouped) == len(set(grouped)) and set(grouped) == info - {"matrix.reported-older"}
    main(["matrix", "query", "tensorflow==2.0.0", "gpus=2"])
    out = capsys.readouterr().out
    assert len(out.splitlines()) <= 26, out  # 25 and the line for entries reported on older releases
    assert " apply depending on your strategy: --strategy multi_worker_mirrored (" in out  # 5 today
    main(["matrix", "query", "tensorflow==2.0.0", "gpus=2", "-v"])
    verbose = capsys.readouterr().out
    titles = {f["title"] for f in data["checks"][-1]["findings"]}
    assert all(t[:60] in " ".join(verbose.split()) for t in titles)


def test_query_terms_and_options_declare_the_same_facts(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main(["matrix", "query", "tensorflow==2.0.0", "gpus=2", "usage=string_input", "--format", "json"])
    by_term = json.loads(capsys.readouterr().out)
    main(["matrix", "query", "tensorflow==2.0.0", "gpus=2", "--usage", "string_input", "--format", "json"])
    by_option = json.loads(capsys.readouterr().out)
    assert known(by_term).keys() == known(by_option).keys()
    assert by_term["training"]["declared_from"] == {"usage": "the query (usage=string_input)"}
    assert by_option["training"]["declared_from"] == {"usage": "--usage"}
    string = "known-issue.tf-35356-distributed-dataset-string-tensors-gpu"
    codes = [c for c in known(by_term) if c.startswith(string[:40])]
    assert codes and known(by_term)[codes[0]]["condition"]["key"] == "strategy"


def test_observed_usage_decides_only_the_words_it_checked():
    profile = TrainingProfile(observed=TrainingFacts(layers=("gru",), usage=("mixed_precision",)),
                              observed_from={"layers": "model: m:build", "usage": "model: m:build"},
                              usage_checked=("mixed_precision", "jit_compile"))
    undecided = profile.usage_undecided(("mixed_precision", "jit_compile", "save_model"))
    assert undecided == ("save_model",)
    assert profile.unknown() == ("strategy", "gpus", "workers", "backend", "scenario")
    assert TrainingProfile.from_dict(profile.to_dict()) == profile


def test_declared_profile_reads_nothing_without_files(tmp_path):
    assert declared_profile({}, tmp_path).empty
    with pytest.raises(ProfileError, match="--train-gpus: 'x' is not a number of gpus"):
        declared_profile({"gpus": "x"}, tmp_path)
