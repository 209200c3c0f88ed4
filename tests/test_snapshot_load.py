from __future__ import annotations

import json

import pytest

from mgpu_doctor.model.snapshot import SnapshotLoadError, load_snapshot
from tests.scenarios import SCENARIOS, path_of


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_recorded_snapshots_are_current(name):
    """tests/data matches tests/scenarios.py (regenerate with `python -m tests.scenarios`)."""
    assert load_snapshot(path_of(name)) == SCENARIOS[name]()


def _error(tmp_path, content: str | bytes) -> str:
    path = tmp_path / "snap.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(SnapshotLoadError) as err:
        load_snapshot(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


def test_missing_file(tmp_path):
    with pytest.raises(SnapshotLoadError, match="no such file"):
        load_snapshot(tmp_path / "nope.json")


def test_directory(tmp_path):
    with pytest.raises(SnapshotLoadError, match="is a directory"):
        load_snapshot(tmp_path)


def test_empty_file(tmp_path):
    assert "file is empty" in _error(tmp_path, "  \n")


def test_truncated_file(tmp_path):
    text = path_of("sick-box").read_text()
    assert "not valid JSON" in _error(tmp_path, text[: len(text) // 2])


def test_plain_text_where_a_snapshot_is_wanted_says_pastes_go_to_check_from(tmp_path):
    message = _error(tmp_path, "GPU 0: A100\n")
    assert "plain text, not a snapshot or report" in message and "`mgpu-doctor check --from`" in message


def test_binary_garbage_and_other_encodings_say_what_the_file_is(tmp_path):
    assert "is UTF-16 text; mgpu-doctor reads UTF-8" in _error(tmp_path, b"\xff\xfe\x00garbage")
    assert "is a binary file (a NUL byte at offset 3)" in _error(tmp_path, b"abc\x00garbage")
    assert "is not UTF-8 text (byte 0xe9 at line 2, column 6)" in _error(tmp_path, b'{\n "caf\xe9": 1}')


def test_json_but_not_a_snapshot(tmp_path):
    assert "expected a JSON object" in _error(tmp_path, "[1, 2]")
    assert "no schema_version" in _error(tmp_path, '{"gpus": []}')


def test_future_schema_version(tmp_path):
    data = json.loads(path_of("sick-box").read_text())
    data["schema_version"] = 99
    assert "schema_version 99 is not supported" in _error(tmp_path, json.dumps(data))


def test_wrong_field_type_names_the_field(tmp_path):
    data = json.loads(path_of("sick-box").read_text())
    data["nvml"]["gpus"][0]["name"] = 7
    assert "field snapshot.nvml.gpus[0].name: expected str" in _error(tmp_path, json.dumps(data))


def test_report_json_is_not_mistaken_for_a_snapshot(tmp_path):
    assert "not a snapshot" in _error(tmp_path, '{"kind": "something-else", "schema_version": 1}')


def _at_limits(gpus: int, string_chars: int, where: str) -> str:
    data = json.loads(path_of("healthy-8gpu-nvlink").read_text())
    gpu = data["nvml"]["gpus"][0]
    data["nvml"]["gpus"] = [{**gpu, "index": i, "uuid": f"GPU-{i:08x}-1111-2222-3333-444455556666"}
                            for i in range(gpus)]
    data["nvml"]["links"] = []
    if where == "env":
        data["env"]["LD_LIBRARY_PATH"] = "/opt/lib:" * (string_chars // 9) + "x" * (string_chars % 9)
    else:
        data["nvml"]["gpus"][3]["name"] = "A" * string_chars
    return json.dumps(data)


@pytest.mark.parametrize("where, field", [("env", "snapshot.env.LD_LIBRARY_PATH"),
                                          ("gpu", "snapshot.nvml.gpus[3].name")])
def test_a_string_longer_than_any_fact_is_refused_naming_its_field(tmp_path, where, field):
    """A 1 MiB GPU name or environment value is no machine's: refused, not read for minutes."""
    message = _error(tmp_path, _at_limits(8, 64 * 1024 + 1, where))
    assert f"field {field}: a string of 65537 characters" in message
    (tmp_path / "ok.json").write_text(_at_limits(8, 64 * 1024, where))
    load_snapshot(tmp_path / "ok.json")  # the limit itself is fine


def test_more_gpus_than_any_machine_has_are_refused_naming_the_field(tmp_path):
    message = _error(tmp_path, _at_limits(4097, 10, "gpu"))
    assert "field snapshot.nvml.gpus: 4097 GPUs; no machine has more than 4096" in message
    (tmp_path / "ok.json").write_text(_at_limits(4096, 10, "gpu"))
    assert len(load_snapshot(tmp_path / "ok.json").nvml.gpus) == 4096


def test_the_limits_are_exit_2_with_one_line_from_the_cli(tmp_path, capsys):
    from mgpu_doctor.cli import main

    path = tmp_path / "huge.json"
    path.write_text(_at_limits(8, 2**20, "env"))
    assert main(["check", "--from", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "snapshot.env.LD_LIBRARY_PATH: a string of 1048576 characters" in err
