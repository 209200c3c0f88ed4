"""`check --from` on pasted text: real blocks from public issue threads (tests/data/pastes, each with
its source URL in its first line), read part by part into a snapshot, judged by every rule."""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.pasted.split import NothingRecognised, snapshot_from_paste

PASTES = Path(__file__).parent / "data" / "pastes"
PROJECTS = ("tf-", "keras-", "hvd-", "nccl-")  # TensorFlow, Keras, Horovod and NCCL threads


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def report_of(capsys, name: str) -> dict:
    code, out, err = run(capsys, "check", "--from", str(PASTES / name), "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def problems(report: dict) -> set[tuple[str, str]]:
    return {(f["code"], f["severity"]) for c in report["checks"] for f in c["findings"]
            if f["severity"] in ("warning", "error", "crash")}


# file -> (the parts recognised, the versions the paste states, the warnings and errors it gets)
EXPECTED: dict[str, tuple[list[str], dict[str, str], set[tuple[str, str]]]] = {
    "tf-22399-template-1x-next-line.md": (  # the answers on the lines after the questions
        ["System information (TensorFlow 1.x template)"], {"tensorflow": "1.11.0-rc0", "python": "3.5.2"}, set()),
    "tf-14364-template-1x.md": (
        ["System information (TensorFlow 1.x template)"],
        {"tensorflow": "1.4", "python": "2.7", "cuda": "8.0", "cudnn": "6.0"}, set()),
    "tf-10827-template-1x-log.md": (
        ["System information (TensorFlow 1.x template)", "TensorFlow log"],
        {"tensorflow": "1.2.0", "cuda": "8.0", "cudnn": "5.1"}, set()),
    "tf-26395-template-2x-windows.md": (
        ["System information (TensorFlow 2.x template)"],
        {"tensorflow": "1.12.0", "python": "3.6", "cuda": "9.0", "cudnn": "7.0.5"}, set()),
    "tf-38982-template-2x.md": (
        ["System information (TensorFlow 2.x template)"],
        {"tensorflow": "2.1.0", "python": "3.6.9", "cuda": "10.1"}, set()),
    "tf-41213-template-smi-440.md": (
        ["System information (TensorFlow 2.x template)", "pip list", "nvidia-smi"],
        {"tensorflow": "2.4.0-dev20200701", "python": "3.7", "driver": "440.33.01"},
        # a tf-nightly 2.4 of 2020-07-01 was still built for CUDA 10.1 (the nightlies moved to
        # CUDA 11.0 from 2020-08-20), which driver 440 (CUDA 10.2) runs: no driver finding
        {("gpu.memory-in-use", "warning")}),
    "tf-53362-template-partial.md": (
        ["System information (TensorFlow 2.x template)"],
        {"tensorflow": "2.7.0", "python": "3.9.7", "cuda": "11.5"}, set()),
    "tf-38134-template-smi-440-gv100.md": (
        ["System information (TensorFlow 1.x template)", "nvidia-smi"],
        {"python": "3.6", "cuda": "10.5", "driver": "440.33.01"}, {("gpu.mixed", "warning")}),
    "tf-62032-smi-450.md": (["nvidia-smi"], {"driver": "450.203.08"}, set()),
    "tf-43718-smi-455.md": (["Versions in prose", "nvidia-smi", "TensorFlow log"], {"driver": "455.23.05"}, set()),
    "tf-29362-smi-384.md": (["nvidia-smi"], {"driver": "384.130"}, {("gpu.mixed", "warning")}),
    "tf-28171-smi-410.md": (["Container image", "nvidia-smi"], {"driver": "410.78"}, set()),
    "tf-26072-smi-q-410.md": (["nvidia-smi -q"], {"driver": "410.78"}, set()),
    "tf-94650-log-2.19.md": (["TensorFlow log"], {"cudnn": "9.10.1"}, set()),
    "tf-29948-log-2.0beta.md": (["TensorFlow log"], {}, set()),
    "tf-49730-log-2.4.md": (["TensorFlow log"], {}, set()),
    "tf-22525-log-cuinit-1x.md": (["TensorFlow log"], {}, {("pasted.cuinit-failed", "error")}),
    "tf-13804-log-creating-device-1x.md": (["TensorFlow log"], {}, set()),
    "tf-50217-cudnn-older-windows.md": (
        ["Versions as typed", "tf.sysconfig.get_build_info()", "TensorFlow log"],
        {"tensorflow": "2.5.0", "python": "3.9.1", "cuda": "11.3", "cudnn": "8.0.5", "built_cuda": "11.2",
         "built_cudnn": "8.1.0"},
        {("pasted.runtime-older-than-build", "error"), ("libraries.older-minor", "error")}),
    "tf-60913-cudnn-9-older.md": (
        ["TensorFlow log"], {"cudnn": "9.1.0", "built_cudnn": "9.3.0"},
        {("pasted.runtime-older-than-build", "error")}),
    "tf-37606-cudnn-older-1.15.md": (
        ["TensorFlow log"], {"cudnn": "7.5.0", "built_cudnn": "7.6.3"},
        {("pasted.runtime-older-than-build", "error")}),
    "tf-3225-cudnn-old-format.md": (  # "5005 (compatibility version 5000)": cuDNN 5.0.5
        ["TensorFlow log"], {"cudnn": "5.0.5", "built_cudnn": "5.1.3"},
        {("pasted.runtime-older-than-build", "error")}),
    "tf-56690-form-2.9.md": (
        ["System information (issue form)"],
        {"tensorflow": "2.9.1", "python": "3.9.13", "cuda": "11.2.2", "cudnn": "8.1.0.77"}, set()),
    "tf-64881-form-2.16.md": (
        ["System information (issue form)"], {"tensorflow": "2.16.1", "python": "3.10.13", "cuda": "12.4"}, set()),
    "tf-70845-form-2.14.md": (
        ["System information (issue form)"],
        {"tensorflow": "2.14.0", "python": "3.11", "cuda": "11.8", "cudnn": "8.7.0.0"}, set()),
    "tf-88122-form-no-driver.md": (
        ["System information (issue form)", "TensorFlow log"],
        {"tensorflow": "2.13", "python": "3.8", "cuda": "12.8", "cudnn": "9.7.1"},
        # TensorFlow 2.13 is built for CUDA 11.8 and cuDNN 8.6
        {("libraries.major-mismatch", "error"), ("pasted.no-gpu", "warning")}),
    "tf-99592-form-2.20.md": (
        ["System information (issue form)"], {"tensorflow": "2.20", "python": "3.12.3", "cuda": "12.9"}, set()),
    "tf-62080-form-windows-2.14.md": (
        ["System information (issue form)"],
        {"tensorflow": "2.14.0", "python": "3.10.10", "cuda": "11.2", "cudnn": "8.1.0.77"},
        {("libraries.older-minor", "error"), ("libraries.older-minor", "warning")}),
    "tf-52981-conda-list.md": (["conda list"], {}, set()),
    "tf-44012-log-not-loaded.md": (["TensorFlow log"], {}, {("pasted.library-not-loaded", "error")}),
    "tf-45258-log-windows-dll.md": (["TensorFlow log"], {}, set()),
    "tf-44040-versions-log-2.3.md": (  # TensorFlow 2.3 is built for cuDNN 7.6
        ["System information (TensorFlow 2.x template)", "TensorFlow log"],
        {"tensorflow": "2.3.1", "python": "3.7.4", "cuda": "10.1.243", "cudnn": "8.0.4", "driver": "450.80.02"},
        {("libraries.major-mismatch", "error")}),
    "tf-52378-conda-row-cuinit-1.4.md": (
        ["System information (TensorFlow 2.x template)", "TensorFlow log"],
        {"tensorflow": "1.4.1", "python": "2.7.15", "cuda": "8.0.61", "cudnn": "6.0.21"},
        {("pasted.cuinit-failed", "error")}),
    "keras-14831-versions-2.5.md": (
        ["Versions as typed"], {"tensorflow": "2.5.0", "python": "3.9.0", "cuda": "11.2"}, set()),
    "hvd-1603-template-tf-1.15.md": (  # the 1.15 wheel opens libcudart.so.10.0: CUDA 10.1 cannot stand in
        ["Environment (Horovod template)"], {"tensorflow": "1.15", "cuda": "10.1", "horovod": "0.18.2", "openmpi": "3.1.0"},
        {("libraries.soname-minor", "error")}),
    "hvd-4039-template-tf-2.12.md": (
        ["Environment (Horovod template)"], {"tensorflow": "2.12.0", "python": "3.10", "horovod": "0.28.1"}, set()),
    "hvd-1453-template-pytorch.md": (  # PyTorch 1.1: no TensorFlow version in it
        ["Environment (Horovod template)"], {"python": "3.6.6", "cuda": "10.1", "nccl": "2.3", "horovod": "0.18.1"},
        set()),
    "hvd-3372-template-cuinit.md": (
        ["Environment (Horovod template)", "TensorFlow log"],
        {"tensorflow": "2.6.0", "python": "3.9.5", "cuda": "11.3.1", "nccl": "2.10.3", "horovod": "0.23.0", "openmpi": "4.1.1"},
        {("pasted.cuinit-failed", "error")}),
    "hvd-4051-template-pytorch-nccl.md": (  # torch.cuda.nccl.version() as "2, 14, 3"
        ["Environment (Horovod template)"],
        {"python": "3.9", "cuda": "11.7", "nccl": "2.14.3", "horovod": "0.28", "mpi": "4.1.4"}, set()),
    "nccl-1936-log-2.27.md": (["NCCL log"], {"nccl": "2.27.5"}, set()),
    "nccl-857-log-2.10.md": (["NCCL log"], {"nccl": "2.10.3"}, set()),
    "nccl-340-tf-log-2.5.7.md": (["TensorFlow log"], {"nccl": "2.5.7"}, set()),
    "nccl-788-smi-oneline-470.md": (["nvidia-smi"], {"driver": "470.161.03"}, set()),
    # Versions in the text's own words, tool lines next to them, images and launch commands.
    "tf-29362-nvcc-5.5.md": (  # nvcc on PATH is 5.5: the toolkit, not the CUDA the template states
        ["Versions as typed", "nvcc --version"], {"tensorflow": "1.2.0", "cuda": "8.0.61", "cuda_toolkit": "5.5.0"},
        set()),
    "tf-40277-template-tf2.1.0-gpu-py3.md": (  # "TF2.1.0-gpu-py3": a version glued to its name
        ["System information (TensorFlow 2.x template)"], {"tensorflow": "2.1.0", "python": "3.6", "cuda": "10.1"},
        set()),
    "tf-21788-prose-docker-1.10.md": (["Versions in prose"], {"tensorflow": "1.10"}, set()),
    "tf-44208-docker-image-2.2.1.md": (
        ["System information (TensorFlow 2.x template)", "Container image", "nvidia-smi"],
        {"tensorflow": "2.2.1", "python": "3.8.5", "driver": "450.80.02"}, set()),
    "tf-41132-docker-2.3.0rc0.md": (["Container image"], {"tensorflow": "2.3.0rc0"}, set()),
    "tf-45571-found-device-2x-v100.md": (["TensorFlow log"], {}, set()),
    "keras-8213-worked-before.md": (  # what worked two weeks ago is not what is installed
        ["Versions in prose"], {}, {("matrix.unknown-error", "warning")}),
    "hvd-1893-template-horovodrun.md": (
        ["Environment (Horovod template)", "Horovod/MPI launch"],
        {"tensorflow": "2.1.0", "python": "3.6.8", "cuda": "10.1.243", "nccl": "2.6.4", "horovod": "0.19.1",
         "mpi": "4.0.1"}, set()),
    "hvd-215-mpirun-32.md": (["Horovod/MPI launch"], {}, set()),
    "hvd-1167-horovodrun-verbose.md": (["Horovod/MPI launch"], {}, set()),
    # Formats no TensorFlow/Keras/Horovod/NCCL thread had whole: from other projects' threads.
    "other-sionna-1044-smi-580-log.md": (["nvidia-smi", "TensorFlow log"], {"driver": "580.95.05"}, set()),
    "other-wyoming-20-smi-550.md": (["nvidia-smi"], {"driver": "550.135"}, {("gpu.memory-in-use", "warning")}),
    "other-jaxwin-35-smi-552-wddm.md": (["nvidia-smi"], {"driver": "552.86"}, {("gpu.memory-in-use", "warning")}),
    "other-netdata-15755-smi-xml-535.md": (["nvidia-smi -q -x"], {"driver": "535.86.05"}, set()),
    "other-a0s-1-smi-xml-418.md": (["nvidia-smi -q -x"], {"driver": "418.56"}, set()),
    "other-pytorch-150852-collect-env.md": (
        ["PyTorch collect_env"], {"python": "3.10.16", "cuda": "12.6.85", "driver": "535.154.05"}, set()),
    "other-kubeflow-1169-dockerfile.md": (  # TensorFlow 2.1 opens libcudart.so.10.1: CUDA 10.0 cannot stand in
        ["Versions in prose", "Container image"], {"tensorflow": "2.1.0", "cuda": "10.0"},
        {("libraries.soname-minor", "error")}),
    "other-desom-3-pip-install-pins.md": (
        ["Versions in prose"], {"tensorflow": "1.5", "keras": "2.0.9", "python": "3.6", "cuda": "9.0", "cudnn": "7"},
        set()),
    "other-maskrcnn-511-prose-1.7.md": (["Versions in prose"], {"tensorflow": "1.7.0", "keras": "2.1.6"}, set()),
    "other-nvidia-docker-459-found-device-1x.md": (["TensorFlow log"], {}, set()),
    "other-nvidia-docker-1071-ngc-19.08.md": (["Container image", "Versions in prose"], {"driver": "390.116"}, set()),
    "other-saturncloud-155-env-yml-diff.md": (["Versions in prose"], {"tensorflow": "2.2.0"}, set()),
    "other-condaforge-157-build-info.md": (
        ["tf.sysconfig.get_build_info()"], {"built_cuda": "11.2", "built_cudnn": "8"}, set()),
}


def test_every_paste_has_its_source_and_an_expectation():
    files = sorted(p.name for p in PASTES.glob("*.md"))
    assert files == sorted(EXPECTED)
    for name in files:
        first = (PASTES / name).read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("<!-- source: https://github.com/") and first.endswith("-->"), name
    assert sum(name.startswith(PROJECTS) for name in files) >= 25


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_paste_gives_its_facts(name):
    kinds, versions, _ = EXPECTED[name]
    snapshot = snapshot_from_paste((PASTES / name).read_text(encoding="utf-8"), name)
    assert snapshot.pasted is not None
    assert [p.kind for p in snapshot.pasted.parts] == kinds
    assert {k: v.text for k, v in snapshot.pasted.versions.items()} == versions
    for key, value in snapshot.pasted.versions.items():
        assert value.source.startswith("pasted: "), (key, value)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_paste_gets_its_verdicts(capsys, name):
    # Known issues are left out: the matrix grows, and each entry tests its own matches.
    found = {p for p in problems(report_of(capsys, name)) if not p[0].startswith("known-issue.")}
    assert found == EXPECTED[name][2]


def test_the_known_issues_run_on_a_pasted_version(capsys):
    report = report_of(capsys, "tf-53362-template-partial.md")
    known = next(c for c in report["checks"] if c["name"] == "known-issues")
    assert known["status"] != "skipped"
    assert any("tensorflow 2.7.0" in line for f in known["findings"] for line in f["evidence"])


def test_nvidia_smi_gpus_carry_what_the_table_and_the_log_say():
    # The table: every GPU row, its memory, the bus id; "Found device" adds the compute capability.
    snap = snapshot_from_paste((PASTES / "tf-43718-smi-455.md").read_text(encoding="utf-8"), "x")
    gpu = snap.nvml.gpus[0]
    assert (gpu.name, gpu.memory_total_bytes, gpu.memory_used_bytes, gpu.pci_bus_id) == (
        "GeForce RTX 3090", 24265 * 2**20, 590 * 2**20, "00000000:0D:00.0")
    assert gpu.compute_capability == "8.6" and gpu.persistence_mode is True
    assert snap.nvml.cuda_driver_version == "11.1"
    assert isinstance(gpu.pcie_gen_max, Unavailable) and gpu.pcie_gen_max.detail == "not in the pasted text"
    smi = snapshot_from_paste((PASTES / "tf-62032-smi-450.md").read_text(encoding="utf-8"), "x")
    assert [(g.index, g.name, g.ecc_uncorrected_volatile, g.mig_mode) for g in smi.nvml.gpus] == [
        (0, "Tesla K80", 0, Unavailable("skipped", "not in the pasted text", "not-pasted")),
        (1, "Tesla K80", 0, Unavailable("skipped", "not in the pasted text", "not-pasted"))]


def test_nvidia_smi_q_and_xml_give_the_uuid():
    q = snapshot_from_paste((PASTES / "tf-26072-smi-q-410.md").read_text(encoding="utf-8"), "x")
    assert (q.nvml.gpus[0].name, q.nvml.gpus[0].uuid, q.nvml.gpus[0].persistence_mode) == (
        "Quadro M1200", "GPU-d9093d17-7927-a053-9104-426e68b1d4ac", True)
    xml = snapshot_from_paste((PASTES / "other-a0s-1-smi-xml-418.md").read_text(encoding="utf-8"), "x")
    assert (xml.nvml.gpus[0].name, xml.nvml.gpus[0].uuid, xml.nvml.cuda_driver_version) == (
        "Quadro P2000", "GPU-1ffe36ef-ac55-60ad-f9cf-623871e7736d", "10.1")
    assert "cut off" in " ".join(xml.pasted.parts[0].facts)


def test_a_header_line_alone_names_the_driver_not_the_gpus():
    snap = snapshot_from_paste((PASTES / "nccl-788-smi-oneline-470.md").read_text(encoding="utf-8"), "x")
    assert isinstance(snap.nvml, Unavailable)  # no GPU rows: the GPUs stay unknown, never "none"
    assert resolve(snap).driver.text == "470.161.03"


def test_the_log_devices_become_tensorflows_devices():
    snap = snapshot_from_paste((PASTES / "tf-94650-log-2.19.md").read_text(encoding="utf-8"), "x")
    devices = snap.tensorflow.physical_devices
    assert [(d.name, d.details["device_name"], d.details["compute_capability"]) for d in devices] == [
        ("/physical_device:GPU:0", "NVIDIA A16", "(8, 6)"), ("/physical_device:GPU:1", "NVIDIA A16", "(8, 6)")]


def test_system_information_and_the_cudnn_line_make_one_error_naming_both_lines(capsys):
    report = report_of(capsys, "tf-50217-cudnn-older-windows.md")
    finding = next(f for c in report["checks"] for f in c["findings"]
                   if f["code"] == "pasted.runtime-older-than-build")
    assert finding["severity"] == "error"
    assert "cuDNN 8.0.5 was loaded, older than the 8.1.0" in finding["title"]
    evidence = "\n".join(finding["evidence"])
    assert "line 18 (TensorFlow log): " in evidence and "Loaded runtime CuDNN library: 8.0.5" in evidence
    assert "also stated: 8.2.0 (pasted: Versions as typed, line 6)" in evidence
    code, out, _ = run(capsys, "check", "--from", str(PASTES / "tf-50217-cudnn-older-windows.md"))
    assert code == 1 and "cuDNN 8.0.5 was loaded" in out


def test_a_browser_copy_with_quotes_fences_and_wrapped_lines(tmp_path, capsys):
    paste = tmp_path / "issue.txt"
    paste.write_text(
        "> **System information**\n"
        "> - TensorFlow version (use command below): v2.5.0-rc3-213-ga4dfb8d1a71 2.5.0\n"
        "> - CUDA/cuDNN version: 11.2/8.0.5\n"
        ">\n"
        "> ```\n"
        "> 2021-11-24 04:51:47.954507: E tensorflow/stream_executor/cuda/cuda_dnn.cc:362] Loaded runtime CuDNN "
        "library:\n"
        "> 8.0.5 but source was compiled with: 8.1.0.  CuDNN library needs to have matching major version\n"
        "> ```\n", encoding="utf-8")
    code, out, _ = run(capsys, "check", "--from", str(paste), "--format", "json")
    report = json.loads(out)
    assert code == 1
    assert ("pasted.runtime-older-than-build", "error") in problems(report)
    pasted = report["snapshot"]["pasted"]
    assert [p["kind"] for p in pasted["parts"]] == ["System information (TensorFlow 2.x template)", "TensorFlow log"]
    assert pasted["versions"]["cudnn"]["source"] == "pasted: TensorFlow log, line 6"
    assert pasted["provenance"]["versions.tensorflow"] == "pasted: System information (TensorFlow 2.x template), line 2"


def test_the_report_lists_the_parts_and_the_lines_it_could_not_read(tmp_path, capsys):
    paste = tmp_path / "issue.md"
    paste.write_text("**System information**\n- TensorFlow version (use command below): 2.4.1\n"
                     "- CUDA/cuDNN version: see below\n- Python version: 3.8\n\nIt hangs.\n", encoding="utf-8")
    code, out, _ = run(capsys, "check", "--from", str(paste))
    assert code == 0
    assert "Pasted System information (TensorFlow 2.x template) (lines 1-4): tensorflow: 2.4.1" in out
    assert "could not read line 3: - CUDA/cuDNN version: see below" in out
    assert "1 other non-blank line(s) are not an output mgpu-doctor reads" in out


def test_facts_the_paste_does_not_state_are_not_in_the_pasted_text(tmp_path, capsys):
    paste = tmp_path / "issue.md"
    paste.write_text("- TensorFlow version: 2.15.0\n- Python version: 3.11\n", encoding="utf-8")
    report = report_of(capsys, str(paste))
    snap = report["snapshot"]
    assert snap["nvml"] == {"unavailable": "skipped", "detail": "not in the pasted text", "cause": "not-pasted"}
    assert snap["packages"]["detail"] == "not in the pasted text"
    skipped = {c["name"]: c["skip_reason"] for c in report["checks"] if c["status"] == "skipped"}
    assert skipped["gpus"] == "nvidia-smi output skipped: not in the pasted text"
    assert "not in the pasted text" in skipped["cuda-visible-devices"]


def test_a_paste_report_fits_the_schema(capsys):
    report = report_of(capsys, "tf-50217-cudnn-older-windows.md")
    schema = json.loads(resources.files("mgpu_doctor").joinpath("schemas/report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    report["snapshot"]["pasted"]["parts"][0]["first_line"] = "one"
    assert not jsonschema.Draft202012Validator(schema).is_valid(report)
    for name in ("hvd-1893-template-horovodrun.md", "other-nvidia-docker-1071-ngc-19.08.md",
                 "keras-8213-worked-before.md"):  # launches, images, an old set-up
        jsonschema.Draft202012Validator(schema).validate(report_of(capsys, name))


def test_nothing_recognisable_is_one_line_and_exit_2(tmp_path, capsys):
    paste = tmp_path / "prose.txt"
    paste.write_text("My model does not train on two GPUs.\nPlease help!\n", encoding="utf-8")
    with pytest.raises(NothingRecognised):
        snapshot_from_paste(paste.read_text(), str(paste))
    code, out, err = run(capsys, "check", "--from", str(paste))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "not a paste with anything mgpu-doctor reads" in err


def test_a_100_mb_paste_is_refused_quickly(tmp_path, capsys):
    paste = tmp_path / "huge.log"
    paste.write_bytes(b"2021-01-01 00:00:00.000000: I tensorflow/x.cc:1] Successfully opened dynamic library "
                      b"libcudart.so.11.0\n" * (100 * 2**20 // 110))
    started = time.monotonic()
    code, out, err = run(capsys, "check", "--from", str(paste))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "larger than" in err
    assert time.monotonic() - started < 10  # a bound, not a benchmark: reading stops at the limit


def test_a_paste_over_the_paste_limit_is_refused(tmp_path, capsys, monkeypatch):
    from mgpu_doctor.pasted import split

    monkeypatch.setattr(split, "MAX_PASTE_CHARS", 1000)
    paste = tmp_path / "long.log"
    paste.write_text("- TensorFlow version: 2.15.0\n" * 100, encoding="utf-8")
    code, _, err = run(capsys, "check", "--from", str(paste))
    assert code == 2 and "larger than the 0 MiB a pasted text may be" in err


def test_a_paste_is_redacted_like_every_input(tmp_path, capsys):
    paste = tmp_path / "issue.md"
    paste.write_text("- TensorFlow version: 2.15.0\n- Python version: 3.11\n"
                     "- OS Platform and Distribution: Ubuntu 22.04 token=ghp_abcdefghijklmnopqrstuvwxyz0123456789\n",
                     encoding="utf-8")
    code, out, _ = run(capsys, "check", "--from", str(paste), "--format", "json", "--no-redact")
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in out
    assert json.loads(out)["snapshot"]["host"]["os_release"].startswith("Ubuntu 22.04")


def test_a_json_snapshot_that_is_broken_is_still_a_json_error(tmp_path, capsys):
    broken = tmp_path / "snap.json"
    broken.write_text('{"schema_version": 1, "kind": ', encoding="utf-8")
    code, _, err = run(capsys, "check", "--from", str(broken))
    assert code == 2 and "not valid JSON" in err


# Formats no stored thread had: built from what the tools print (not a user's paste).

TF_ENV_COLLECT = """Collecting system information...

== check python ===================================================
python version: 3.6.9
python branch:
python build version: ('default', 'Nov  7 2019 10:44:02')
python compiler version: GCC 8.3.0
python implementation: CPython

== check os platform ===============================================
os: Linux
== are we in docker =============================================
No

== check pips ===================================================
numpy                  1.18.1
protobuf               3.11.3
tensorflow-gpu         1.15.2

== tensorflow import ============================================
tf.version.VERSION = 1.15.2
tf.version.GIT_VERSION = v1.15.0-92-g5d80e1e
tf.version.COMPILER_VERSION = 7.3.1 20180303

== cuda libs  ===================================================
/usr/local/cuda-10.0/lib64/libcudart.so.10.0.130

== python version  ==============================================
(major, minor, micro, releaselevel, serial)
(3, 6, 9, 'final', 0)
"""


def test_tf_env_collect_output_as_the_script_prints_it():
    """Section headers and lines as tools/tf_env_collect.sh writes them (its echo and print calls)."""
    snap = snapshot_from_paste(TF_ENV_COLLECT, "tf_env.txt")
    kinds = [p.kind for p in snap.pasted.parts]
    assert "tf_env_collect.sh" in kinds and "pip list" in kinds
    versions = {k: v.text for k, v in snap.pasted.versions.items()}
    assert versions["tensorflow"] == "1.15.2" and versions["python"] == "3.6.9" and versions["cuda"] == "10.0.130"
    assert snap.packages.versions["tensorflow-gpu"] == "1.15.2"
    assert snap.tensorflow.version == "1.15.2"  # TensorFlow printed it itself
    assert resolve(snap).tensorflow.text == "1.15.2"


def test_pip_freeze_and_pip_list_with_its_header():
    freeze = snapshot_from_paste("absl-py==1.4.0\nkeras==2.12.0\ntensorflow==2.12.0\nnumpy==1.23.5\n", "x")
    assert [p.kind for p in freeze.pasted.parts] == ["pip freeze"]
    assert freeze.packages.versions["tensorflow"] == "2.12.0"
    assert freeze.packages.locations["tensorflow"] == "pasted: pip freeze, lines 1-4"
    env = resolve(freeze)
    assert (env.tensorflow.text, env.keras.text) == ("2.12.0", "2.12.0")
    listed = snapshot_from_paste("Package    Version\n---------- -------\nkeras      3.3.3\ntensorflow 2.16.1\n", "x")
    assert [p.kind for p in listed.pasted.parts] == ["pip list"]
    assert listed.packages.versions == {"keras": "3.3.3", "tensorflow": "2.16.1"}


def test_two_lines_of_prose_that_look_like_a_package_row_are_not_a_list():
    with pytest.raises(NothingRecognised):
        snapshot_from_paste("Epoch 1\nStep 2\n", "x")


def test_a_line_the_log_repeats_is_one_fact_with_its_count():
    snap = snapshot_from_paste((PASTES / "tf-60913-cudnn-9-older.md").read_text(encoding="utf-8"), "x")
    assert [(e.kind, e.loaded, e.compiled, e.repeated) for e in snap.pasted.log] == [
        ("runtime-mismatch", "9.1.0", "9.3.0", 1)]
    lines = "2021-05-26 11:50:43.607718: I dso_loader.cc:49] Successfully opened dynamic library libcudnn.so.8\n"
    long_log = snapshot_from_paste(lines * 5000, "x")
    assert len(long_log.pasted.log) == 1 and long_log.pasted.log[0].repeated == 4999
    assert long_log.tensorflow.loaded_libraries == ["libcudnn.so.8"]


# nvidia-smi -q laid out as the driver prints it (field names of `nvidia-smi -q`; drivers from 530 say
# "Clocks Event Reasons" and split ECC into SRAM/DRAM): built for the GPU checks, not a user's paste.
SMI_Q = """==============NVSMI LOG==============

Timestamp                                 : Mon Jan  1 00:00:00 2024
Driver Version                            : 535.104.05
CUDA Version                              : 12.2

Attached GPUs                             : 2
GPU 00000000:07:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    Persistence Mode                      : Enabled
    MIG Mode
        Current                           : Disabled
        Pending                           : Disabled
    GPU UUID                              : GPU-11111111-2222-3333-4444-555555555555
    Minor Number                          : 0
    PCI
        Bus Id                            : 00000000:07:00.0
        GPU Link Info
            PCIe Generation
                Max                       : 4
                Current                   : 4
            Link Width
                Max                       : 16x
                Current                   : 8x
    Clocks Event Reasons
        Idle                              : Not Active
        HW Slowdown                       : Active
    FB Memory Usage
        Total                             : 81920 MiB
        Reserved                          : 565 MiB
        Used                              : 4 MiB
        Free                              : 81350 MiB
    Compute Mode                          : Default
    Ecc Mode
        Current                           : Enabled
        Pending                           : Enabled
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 2
    Temperature
        GPU Current Temp                  : 34 C
    Processes                             : None

GPU 00000000:0F:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    Persistence Mode                      : Enabled
    GPU UUID                              : GPU-66666666-7777-8888-9999-000000000000
    Minor Number                          : 1
    PCI
        Bus Id                            : 00000000:0F:00.0
    FB Memory Usage
        Total                             : 81920 MiB
        Used                              : 4 MiB
    Compute Mode                          : Default
    Processes                             : None
"""


def test_the_gpu_checks_run_on_what_nvidia_smi_q_says(tmp_path, capsys):
    snap = snapshot_from_paste(SMI_Q, "x")
    first, second = snap.nvml.gpus
    assert (first.uuid, first.pcie_width_current, first.pcie_width_max, first.ecc_uncorrected_volatile) == (
        "GPU-11111111-2222-3333-4444-555555555555", 8, 16, 2)
    assert first.throttle_reasons == ["hw_slowdown"] and first.mig_mode is False and first.processes == []
    assert (second.index, second.memory_total_bytes) == (1, 81920 * 2**20)
    assert snap.pasted.provenance["nvml"] == "pasted: nvidia-smi -q, lines 1-58"
    paste = tmp_path / "smi.txt"
    paste.write_text(SMI_Q, encoding="utf-8")
    found = problems(report_of(capsys, str(paste)))
    assert {"gpu.ecc-uncorrected", "gpu.pcie-width-degraded"} <= {code for code, _ in found}


# The forms people write versions and commands in (each file: a real thread, its URL in its first line).

def paste(name: str):
    return snapshot_from_paste((PASTES / name).read_text(encoding="utf-8"), name)


def test_a_version_in_prose_ranks_below_a_tools_output():
    snap = paste("tf-43718-smi-455.md")  # "Nvidia Driver 455.23" typed, nvidia-smi prints 455.23.05
    driver = snap.pasted.versions["driver"]
    assert (driver.text, driver.source) == ("455.23.05", "pasted: nvidia-smi, lines 8-22")
    assert driver.others == ["455.23 (pasted: Versions in prose, line 5)"]
    pins = paste("other-desom-3-pip-install-pins.md")  # pip install tensorflow-gpu==1.5, cudatoolkit=9.0 cudnn=7
    assert pins.pasted.versions["tensorflow"].source == "pasted: Versions in prose, line 15"
    assert resolve(pins).tensorflow.text == "1.5"


def test_nvcc_names_the_toolkit_and_the_cuda_version_only_where_nothing_else_does():
    snap = paste("tf-29362-nvcc-5.5.md")
    versions = snap.pasted.versions
    assert (versions["cuda"].text, versions["cuda_toolkit"].source) == ("8.0.61", "pasted: nvcc --version, line 15")
    nvcc_only = "\n".join((PASTES / "tf-29362-nvcc-5.5.md").read_text(encoding="utf-8").splitlines()[10:16])
    alone = snapshot_from_paste(nvcc_only, "x")
    assert alone.pasted.versions["cuda"].text == "5.5.0" and resolve(alone).cuda.text == "5.5.0"


def test_nvidia_smis_cuda_version_is_the_drivers_not_the_runtime():
    for name in ("tf-44208-docker-image-2.2.1.md", "nccl-788-smi-oneline-470.md"):
        snap = paste(name)
        assert "cuda" not in snap.pasted.versions, name
        cuda = resolve(snap).cuda  # in the 2.2.1 image: what TensorFlow 2.2 was built for, not 11.0
        assert cuda.chosen is None or cuda.chosen.origin.name != "PASTED", name


def test_found_device_lines_give_the_gpus_and_their_compute_capability():
    from mgpu_doctor.environment.machine import machine_facts

    old = machine_facts(paste("other-nvidia-docker-459-found-device-1x.md"))  # "major: 5 minor: 2"
    assert (old.gpus, old.compute_capabilities, old.gpu_names) == (
        2, ("5.2", "5.2"), ("GeForce GTX TITAN X", "GeForce GTX TITAN X"))
    # 2.x: "computeCapability: 7.0"; XLA's "StreamExecutor device (3)" lines name the GPUs the cut log
    # has no "Found device" line for
    new = paste("tf-45571-found-device-2x-v100.md")
    assert [d.name for d in new.tensorflow.physical_devices] == [f"/physical_device:GPU:{i}" for i in range(4)]
    assert new.tensorflow.physical_devices[0].details["pci_bus_id"] == "0000:34:00.0"
    assert machine_facts(new).compute_capabilities == ("7.0",) * 4


def test_container_images_name_tensorflow_and_ngc_images_only_themselves():
    snap = paste("tf-44208-docker-image-2.2.1.md")
    assert [(i.image, i.kind, i.tensorflow, i.line) for i in snap.pasted.images] == [
        ("tensorflow/tensorflow:2.2.1-gpu-py3-jupyter", "tensorflow", "2.2.1", 11)]
    assert snap.pasted.versions["tensorflow"].source == "pasted: Container image, line 11"
    ngc = paste("other-nvidia-docker-1071-ngc-19.08.md")
    assert [(i.image, i.kind, i.tensorflow) for i in ngc.pasted.images] == [
        ("nvcr.io/nvidia/tensorflow:19.08-py3", "ngc", "")]
    assert "tensorflow" not in ngc.pasted.versions  # the tag is NVIDIA's release, not TensorFlow's
    assert ngc.pasted.versions["driver"].text == "390.116"
    latest = paste("tf-28171-smi-410.md")  # tensorflow/tensorflow:latest-gpu names no release
    assert latest.pasted.images and "tensorflow" not in latest.pasted.versions


def test_horovodrun_and_mpirun_lines_are_a_horovod_training_of_that_many_processes():
    launches = paste("hvd-1893-template-horovodrun.md").pasted.launches
    assert [(x.tool, x.processes, x.hosts, x.line) for x in launches] == [("horovodrun", 4, ["localhost:4"], 17)]
    assert [(x.tool, x.processes) for x in paste("hvd-215-mpirun-32.md").pasted.launches] == [("mpirun", 32)]
    verbose = paste("hvd-1167-horovodrun-verbose.md").pasted.launches
    assert [(x.tool, x.processes, x.hosts) for x in verbose] == [
        ("horovodrun", 3, ["localhost:3"]), ("mpirun", 3, ["localhost:3"])]
    template = paste("hvd-1893-template-horovodrun.md").pasted.versions
    assert (template["horovod"].text, template["mpi"].text) == ("0.19.1", "4.0.1")


def test_a_launch_line_feeds_the_training_profile_and_a_bare_mpirun_does_not(capsys):
    # horovod/horovod#1893: "horovodrun -np 4 -H localhost:4 python train.py" in the template.
    main(["check", "--from", str(PASTES / "hvd-1893-template-horovodrun.md"), "--format", "json"])
    training = json.loads(capsys.readouterr().out)["training"]
    assert (training["observed"]["strategy"], training["observed"]["workers"]) == ("horovod", 4)
    assert training["observed_from"]["strategy"] == "pasted text line 17: horovodrun"
    # horovod/horovod#215: mpirun with no word of Horovod in the text: MPI runs other programs too
    main(["check", "--from", str(PASTES / "hvd-215-mpirun-32.md"), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["training"]["observed"]["strategy"] is None


def test_a_set_up_the_text_calls_old_or_working_is_not_what_is_installed(capsys):
    snap = paste("keras-8213-worked-before.md")  # "Two weeks ago with keras 2.0.9, cudnn-7, cuda 9.1 ... worked"
    assert snap.pasted.versions == {}
    assert [p.split(" (")[0] for p in snap.pasted.previous] == ["keras 2.0.9", "cudnn 7", "cuda 9.1"]
    diff = paste("other-saturncloud-155-env-yml-diff.md")  # an environment.yml diff: "-- tensorflow=2.1.0"
    assert diff.pasted.versions["tensorflow"].text == "2.2.0"
    assert [p.split(" (")[0] for p in diff.pasted.previous] == ["tensorflow 2.1.0"]
    found = problems(report_of(capsys, "other-saturncloud-155-env-yml-diff.md"))
    assert not any(code.startswith(("packages.", "versions.")) for code, _ in found)
    code, out, _ = run(capsys, "check", "--from", str(PASTES / "keras-8213-worked-before.md"))
    assert "kept apart as a set-up the text calls old or working" in out and "keras 2.0.9 (line 2)" in out


@pytest.mark.parametrize("name", ["hvd-215-mpirun-32.md", "other-desom-3-pip-install-pins.md",
                                  "other-kubeflow-1169-dockerfile.md", "tf-41132-docker-2.3.0rc0.md"])
def test_a_paste_that_states_a_version_or_a_launch_is_read_not_rejected(capsys, name):
    code, out, err = run(capsys, "check", "--from", str(PASTES / name))
    assert code in (0, 1) and err == "" and "Pasted " in out


def test_the_prose_readers_stay_linear_on_huge_lines():
    from mgpu_doctor.pasted.commands import find_images, find_launches, find_nvcc
    from mgpu_doctor.pasted.prose import find_prose, previous_lines
    from mgpu_doctor.pasted.text import paste_lines

    line = "tf1.12.0-" * 200_000 + " mpirun -np 4 " + "tensorflow/tensorflow:" * 50_000 + "\n"
    lines = paste_lines(line * 3 + "Cuda compilation tools, " * 100_000 + "\n" + "previously: " * 100_000)
    started = time.monotonic()
    prose = find_prose(lines, set())
    for reader in (find_images, find_launches, find_nvcc, previous_lines):
        reader(lines)
    assert time.monotonic() - started < 2  # a bound, not a benchmark: each line is read to a limit
    assert prose[0].versions["tensorflow"] == "1.12.0"


# Forms found by benchmarks/paste_bench.py on its dev split (the text of each is the thread's own).

def test_cudnn_typed_as_its_version_number_is_read_as_a_version():
    # https://github.com/u39kun/deep-learning-benchmark/issues/6 (comment of 2018-02-14)
    snap = snapshot_from_paste("- CUDA version: 9.0.176\n- CuDNN version: 7003\n"
                               "- NVIDIA driver version: 384.81\n- Version of PyTorch: 0.3.0.post4\n", "x")
    assert snap.pasted.versions["cudnn"].text == "7.0.3"
    assert snap.pasted.versions["cuda"].text == "9.0.176"


def test_a_tensorflow_distribution_joined_to_its_version():
    # https://github.com/tensorflow/tensorflow/issues/45319
    nightly = snapshot_from_paste("**System information**\n- TensorFlow version: tf-nightly-gpu-2.5.0.dev20201201\n"
                                  "- System: Ubuntu 18.04\n- CUDA: 11.1\n- NVIDIA Driver: 455.23.05\n", "x")
    assert nightly.pasted.versions["tensorflow"].text == "2.5.0.dev20201201"
    # https://github.com/tensorflow/tensorflow/issues/26234
    gpu = snapshot_from_paste(
        "**System information**\n- OS Platform and Distribution (e.g., Linux Ubuntu 16.04): Windows 10\n"
        "- TensorFlow installed from (source or binary): binary - pip install tensorflow-gpu\n"
        "- TensorFlow version: tensorflow-gpu-1.13.1\n- Python version: Python 3.6.8\n", "x")
    assert gpu.pasted.versions["tensorflow"].text == "1.13.1"
    # https://github.com/tensorflow/tensorflow/issues/44583: pip's spelling in a numbered list
    listed = snapshot_from_paste("Infos:\n    \n1. tf_nightly_gpu-2.4.0.dev20201023\n2.     cuda version:  11.1\n"
                                 "3.     cudnn version :  8.0.4\n", "x")
    assert listed.pasted.versions["tensorflow"].text == "2.4.0.dev20201023"


def test_a_dev_build_typed_with_a_dash_keeps_its_dev_part():
    # https://github.com/tensorflow/tensorflow/issues/40683: not the 2.3.0 release
    snap = snapshot_from_paste("Windows10 Pro 64bit version\nNvidia GTX1660 TI with latest drivers \n"
                               "Tensorflow - 2.3.0-dev20200615\nCUDA v10.0\ncudnn 7.6.5.32\n", "x")
    assert snap.pasted.versions["tensorflow"].text == "2.3.0-dev20200615"
    assert resolve(snap).tensorflow.text == "2.3.0-dev20200615"


def test_a_projects_copy_of_collect_env_gives_its_tensorflow_line():
    # https://github.com/mindee/doctr/pull/81
    text = ("Collecting environment information...\n\nDocTR version: 0.1.0a0\nTensorFlow version: 2.4.1\n"
            "OS: Ubuntu 20.04.2 LTS\nPython version: 3.8\nIs CUDA available: Yes\nCUDA runtime version: 11.0.221\n"
            "GPU models and configuration: GPU 0: GeForce RTX 2070 with Max-Q Design\n"
            "Nvidia driver version: 450.102.04\n")
    versions = snapshot_from_paste(text, "x").pasted.versions
    assert {k: versions[k].text for k in ("tensorflow", "python", "cuda", "driver")} == {
        "tensorflow": "2.4.1", "python": "3.8", "cuda": "11.0.221", "driver": "450.102.04"}


def test_the_drivers_own_version_lines_give_the_driver():
    # https://github.com/GoogleCloudPlatform/container-engine-accelerators/issues/106
    proc = snapshot_from_paste(
        "root@launchtest:~# cat /proc/driver/nvidia/version \n"
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.26  Mon Apr 30 18:01:39 PDT 2018\n"
        "GCC version:  gcc version 4.9.x 20150123 (prerelease)\n", "x")
    assert proc.pasted.versions["driver"].text == "396.26"
    # https://github.com/NVIDIA/nvidia-container-toolkit/issues/171: a paste of this alone is read, not refused
    dkms = snapshot_from_paste("Host OS: Debian GNU/Linux 11 (bullseye)\nHost dkms status:\n"
                               "`nvidia-current, 470.199.02, 5.10.0-26-amd64, x86_64: installed`\n", "x")
    assert dkms.pasted.versions["driver"].text == "470.199.02"
    assert "driver" not in snapshot_from_paste(
        "GCC version: 9.4.0\nnvidia-current, 5.10, 5.10.0-26-amd64, x86_64: installed\n"
        "Python version: 3.8.10\n", "x").pasted.versions


def test_one_version_under_a_cuda_cudnn_key_is_cudas_only_where_it_cannot_be_cudnns():
    template = ("### System information\n- **TensorFlow version (use command below)**: 1.14.0\n"
                "- **CUDA/cuDNN version**: {}\n- **GPU model and memory**: GTX 1080 8GB\n")
    # https://github.com/tensorflow/models/issues/7590 ("7") and tensorflow/tensorflow#9587 ("7.0"): either
    for value in ("7", "7.0"):
        snap = snapshot_from_paste(template.format(value), "x")
        assert not snap.pasted.versions.keys() & {"cuda", "cudnn"}
        assert f"cuda/cudnn: {value} (CUDA's or cuDNN's: cannot tell)" in snap.pasted.parts[0].facts
    # https://github.com/tensorflow/tensorflow/issues/59413: "12.0" (cuDNN has no 12)
    assert snapshot_from_paste(template.format("12.0"), "x").pasted.versions["cuda"].text == "12.0"
    assert snapshot_from_paste(template.format("5.1"), "x").pasted.versions["cudnn"].text == "5.1"
    # https://github.com/tensorflow/tensorflow/issues/55358: the toolkit's directory name
    named = snapshot_from_paste(template.format("`cuda-11.5 ; cudnn-8.3.2.44.`"), "x").pasted.versions
    assert (named["cuda"].text, named["cudnn"].text) == ("11.5", "8.3.2.44")


def test_two_names_then_two_versions_are_read_in_order():
    # https://github.com/tensorflow/tensorflow/issues/2239
    snap = snapshot_from_paste("### Environment info\nOperating System: ubuntu 14.04\n\n"
                               "Installed version of CUDA and cuDNN: 7.5 and 4 \n", "x")
    assert (snap.pasted.versions["cuda"].text, snap.pasted.versions["cudnn"].text) == ("7.5", "4")
    # https://github.com/NixOS/nixpkgs/issues/72799
    nix = snapshot_from_paste("On 19.09, the packaged versions for Keras and Tensorflow are: 2.2.4 and 1.14.\n", "x")
    assert (nix.pasted.versions["keras"].text, nix.pasted.versions["tensorflow"].text) == ("2.2.4", "1.14")


@pytest.mark.parametrize(("text", "installed", "apart"), [
    # https://github.com/tensorflow/custom-op/issues/113: a support range
    ("Currently, the highest supported CUDA version is 11.2.\nSome of the classes I use from tfa result in a "
     "seg fault when running under linux, with TF 2.9 and python 3.8 and CUDA 11.7\n",
     {"cuda": "11.7", "tensorflow": "2.9", "python": "3.8"}, ["cuda 11.2"]),
    # https://github.com/tensorflow/tensorflow/issues/62498: what a driver allows
    ("On the same distribution (Ubuntu 22.04.3), on a PC with nvidia driver 535.129.03 (thus cuda 12.2 "
     "support), doing `pip3 install tensorflow[and-cuda]==2.15.0`\n", {"driver": "535.129.03"}, ["cuda 12.2"]),
    # https://github.com/tensorflow/tensorflow/issues/59413: what a program looks for
    ("When running tensorflow installation verification command right after pip install, both regular release "
     "and nightly, tensorflow was looking for CUDA 11 libraries, instead of 12.\n", {}, ["cuda 11"]),
    # https://github.com/GoogleCloudPlatform/container-engine-accelerators/issues/106: requirements
    ("Looks like CUDA 10.0 requires driver version >= 410.48 and it appears the max supported by the current "
     "driver installer is 9.2 given it installs version 396.26\n", {}, ["cuda 10.0"]),
    # https://github.com/tensorflow/tensorflow/issues/58026: an example
    ("For example for, tensorflow-gpu==1.12.0 and cuda==9.0, the compatible cuDNN version is 7.1.4 and if I "
     "have A100, tensorflow is not compatible.\n", {}, ["tensorflow 1.12.0", "cuda 9.0", "cudnn 7.1.4"]),
    # https://github.com/RmdanJr/vehicle-distance-estimation/issues/5: removed, then installed
    ("so my work around was to uninstall Keras 2.4.3 like so:\n!pip uninstall Keras\n\nand then installing a "
     "slightly older version Keras 2.2.4:\n!pip install keras==2.2.4\n", {"keras": "2.2.4"}, ["keras 2.4.3"]),
    # https://github.com/Belval/MobileNetV3/issues/7: pip could not find it, so "Collecting" installed nothing
    ("Collecting tensorflow-gpu==1.15.0 (from -r requirements.txt (line 35))\n  Could not find a version that "
     "satisfies the requirement tensorflow-gpu==1.15.0 (from -r requirements.txt (line 35)) (from versions: "
     "1.13.1, 1.14.0)\nNo matching distribution found for tensorflow-gpu==1.15.0\n\n"
     "Reverting to tensorflow-gpu==1.14 helps run the command 'pip install -r requirements.txt'\n",
     {"tensorflow": "1.14"}, ["tensorflow 1.15.0"]),
])
def test_a_version_the_text_requires_supports_gives_as_an_example_or_removed_is_not_installed(
        text, installed, apart):
    snap = snapshot_from_paste(text, "x")
    assert {k: v.text for k, v in snap.pasted.versions.items()} == installed
    assert sorted({p.split(" (")[0] for p in snap.pasted.previous}) == sorted(apart)


def test_an_example_in_parentheses_reaches_only_its_parenthesis():
    snap = snapshot_from_paste("I run a custom build (e.g. with XLA) of TensorFlow 2.4.1 on two GPUs\n", "x")
    assert snap.pasted.versions["tensorflow"].text == "2.4.1"


def test_a_local_label_names_what_a_package_was_built_for_not_an_installed_cuda():
    # https://github.com/horovod/horovod/issues/1274
    snap = snapshot_from_paste('I want to leverage the new feature of NCCL 2.4.8 offered, for example, socket '
                               'send/receive threads. I modified the Dockerfile "ENV NCCL_VERSION=2.4.7-1+cuda10.0" -> '
                               '"ENV NCCL_VERSION=2.4.8-1+cuda10.0", build docker image successfully.\n', "x")
    assert {k: v.text for k, v in snap.pasted.versions.items()} == {"nccl": "2.4.8"}
    # https://github.com/iSEE-Laboratory/LLMDet/issues/32: "+" joining the parts of a set-up is no label
    joined = snapshot_from_paste("我的系统ubuntu20.04+nvidia530.30+cuda12.1+cudnn12.X,其余的配置环境\n", "x")
    assert joined.pasted.versions["cuda"].text == "12.1"


def test_a_driver_branch_alone_in_a_sentence_is_the_driver():
    # https://github.com/k4yt3x/video2x/issues/1226: a paste with nothing else is read, not refused
    snap = snapshot_from_paste("when I run things like nvidia-smi on a Linux Mint host, where the nvidia driver "
                               "is 535. I'm going to try to downgrade the containers drivers to 550\n", "x")
    assert snap.pasted.versions["driver"].text == "535"
    assert "driver" not in snapshot_from_paste("The driver is 100% busy and TensorFlow 2.4.1 hangs\n",
                                               "x").pasted.versions


def test_a_cuda_directory_in_a_path_names_cuda_where_nothing_else_does():
    # https://github.com/tensorflow/tensorflow/issues/45930: find's output
    found = snapshot_from_paste("sudo find / -name 'libcudart.so.11.0'\n"
                                "/usr/local/cuda-11.1/targets/x86_64-linux/lib/libcudart.so.11.0\n", "x")
    assert found.pasted.versions["cuda"].text == "11.1"
    # https://github.com/mindee/doctr/pull/81: a runtime version stated beats the directory
    stated = snapshot_from_paste("Collecting environment information...\n\nTensorFlow version: 2.4.1\n"
                                 "OS: Ubuntu 20.04.2 LTS\nPython version: 3.8\nIs CUDA available: Yes\n"
                                 "CUDA runtime version: 11.0.221\n\n"
                                 "/usr/local/cuda-11.0/targets/x86_64-linux/lib/libcudnn.so.8\n", "x")
    assert (stated.pasted.versions["cuda"].text, stated.pasted.versions["cuda"].others) == ("11.0.221", [])


# Forms found on the paste benchmark's first held-out third (benchmarks/pastes/pastes.toml says which pastes
# were looked at); each test holds the real thread's lines.

def test_a_value_in_a_code_span_and_a_horovod_image_tag_are_read_not_rejected(capsys):
    # https://github.com/horovod/horovod/issues/1335
    text = ("Some potentially important details:\n"
            "- Using image tag `0.16.4-tf1.14.0-torch1.1.0-mxnet1.4.1-py3.6`\n"
            "- Host ubuntu version: `18.04`\n- Nvidia-driver `430.40`\n")
    snap = snapshot_from_paste(text, "x")
    assert {k: v.text for k, v in snap.pasted.versions.items()} == {
        "horovod": "0.16.4", "tensorflow": "1.14.0", "python": "3.6", "driver": "430.40"}
    assert [(i.image, i.kind, i.tensorflow, i.line) for i in snap.pasted.images] == [
        ("horovod/horovod:0.16.4-tf1.14.0-torch1.1.0-mxnet1.4.1-py3.6", "horovod", "1.14.0", 2)]
    from mgpu_doctor.pasted.commands import find_images

    assert not find_images(["tag `0.16.4-tf1.14.0-rocm` and -py3.6"])  # not a Horovod tag's shape


def test_a_change_the_text_says_it_made_names_the_version_it_went_to():
    # https://github.com/NVIDIA/nvidia-docker/issues/365 (the issue and a comment)
    upgraded = snapshot_from_paste(
        "I have upgraded the host nvidia driver to 375.39. However, the nvidia-docker and some container were "
        "installed during 375.26. Therefore, I got the error message\n", "x")
    assert upgraded.pasted.versions["driver"].text == "375.39"
    both = snapshot_from_paste("I have found new clues.\nAfter upgraded the host gpu driver from 375.26 to 375.39: \n"
                               "nvidia-docker       nvidia_driver_375.26\n", "x")
    assert (both.pasted.versions["driver"].text, both.pasted.versions["driver"].others) == ("375.39", [])
    assert [p.split(" (")[0] for p in both.pasted.previous] == ["driver 375.26"]
    # a change still to make names nothing there yet (k4yt3x/video2x#1226)
    intent = snapshot_from_paste("I run TensorFlow 2.4.1. I'm going to try to downgrade the containers drivers "
                                 "to 550 so I can stick with a recommended driver\n", "x")
    assert "driver" not in intent.pasted.versions and intent.pasted.previous == []


def test_an_apt_package_of_a_cuda_release_names_its_minor():
    # https://github.com/microsoft/WSL/issues/6014
    snap = snapshot_from_paste("**Steps on Ubuntu-20.04:**\n\n> sudo apt-get install -y cuda-toolkit-11-2\n", "x")
    assert snap.pasted.versions["cuda"].text == "11.2"


def test_a_cudnn_half_that_repeats_the_cuda_version_gives_way_to_its_parenthesis():
    # https://github.com/tensorflow/tensorflow/issues/63702: cuDNN has no 11
    snap = snapshot_from_paste("### TensorFlow version\n\n2.10.0\n\n### CUDA/cuDNN version\n\n"
                               "11.2 / 11.2(8.1 I think)\n\n### GPU model and memory\n\nNvidia T2000 4GB\n", "x")
    assert (snap.pasted.versions["cuda"].text, snap.pasted.versions["cudnn"].text) == ("11.2", "8.1")
    alone = snapshot_from_paste("- TensorFlow version: 2.4.1\n- CUDA/cuDNN version: 11.0 / 11.0\n", "x")
    assert (alone.pasted.versions["cuda"].text, "cudnn" in alone.pasted.versions) == ("11.0", False)


def test_a_requirement_typed_as_the_answer_is_not_an_installed_version():
    # https://github.com/tensorflow/tensorflow/issues/78531: "> =2.2" is ">=", not a quote
    snap = snapshot_from_paste("### TensorFlow version\n\n> =2.2\n\n### Custom code\n\nYes\n\n"
                               "### Python version\n\n>=9\n\n### CUDA/cuDNN version\n\n12.6 /   9.5\n", "x")
    assert "tensorflow" not in snap.pasted.versions
    assert "tensorflow: > =2.2 (a requirement, not an installed version)" in snap.pasted.parts[0].facts
    assert snapshot_from_paste("> TensorFlow version: 2.4.1\n> Python version: 3.8\n",
                               "x").pasted.versions["tensorflow"].text == "2.4.1"  # a quote stays a quote


def test_what_the_interpreter_printed_outranks_a_release_typed_in_a_sentence():
    # https://github.com/keras-team/keras/issues/19255: the envs are called "keras3.02", "keras3.05"
    snap = snapshot_from_paste(
        "It did not work. I have separate python virtual envs for keras3.02 and\nkeras3.05.  When I run the code "
        "in keras 3.02 I get:\n\nbut when I run the same code in keras 3.05 I get\n\n"
        "*>>> tf.__version__  =   '2.16.0-rc0'   keras.__version__  = '3.0.5'*\n", "x")
    versions = snap.pasted.versions
    assert (versions["keras"].text, versions["keras"].others) == ("3.0.5", [])
    assert versions["tensorflow"].text == "2.16.0-rc0"
    prose = next(p for p in snap.pasted.parts if p.kind == "Versions in prose")
    assert any("keras 3.02 (line 1): typed in a sentence; not taken" in fact for fact in prose.facts)
    # a prompt answered on the next line
    repl = snapshot_from_paste(">>> import tensorflow as tf\n>>> tf.__version__\n'2.4.1'\n", "x")
    assert repl.pasted.versions["tensorflow"].text == "2.4.1"
