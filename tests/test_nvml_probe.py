from __future__ import annotations

import os
import time

import pytest

from mgpu_doctor.model.snapshot import NvmlFacts
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.probes.nvml import gather_nvml
from tests.fake_nvml import FakeGpu, FakeMachine, FakeNvml, bus, gpus


def test_gathers_every_field_of_a_healthy_gpu():
    machine = FakeMachine(gpus=gpus(2))
    machine.gpus[1].processes = [(77, 2**30)]
    facts = gather_nvml(FakeNvml(machine))
    assert isinstance(facts, NvmlFacts)
    assert facts.driver_version == "560.35.03"
    assert facts.cuda_driver_version == "12.6"
    assert facts.nvml_version == "12.560.35.03"  # bytes decoded
    g = facts.gpus[1]
    assert (g.index, g.pci_bus_id, g.compute_capability) == (1, bus(1), "8.0")
    assert g.persistence_mode is True and g.mig_mode is False and g.ecc_enabled is True
    assert g.compute_mode == "default" and g.throttle_reasons == ["gpu_idle"]
    assert (g.pcie_gen_current, g.pcie_width_max) == (4, 16)
    assert [(p.pid, p.used_memory_bytes) for p in g.processes] == [(77, 2**30)]
    [link] = facts.links
    assert (link.a, link.b, link.topology, link.p2p_read, link.nvlink_links) == (0, 1, "node", "ok", 0)


def test_unsupported_fields_become_absent_facts_not_errors():
    machine = FakeMachine(gpus=[FakeGpu(ecc=None, ecc_uncorrected=None, mig=None, throttle_mask=None,
                                        cc=None, processes=[])])
    g = gather_nvml(FakeNvml(machine)).gpus[0]
    for value in (g.ecc_enabled, g.ecc_uncorrected_volatile, g.mig_mode, g.throttle_reasons,
                  g.compute_capability):
        assert isinstance(value, Unavailable) and value.cause == "not-supported"


def test_nvlink_links_are_counted_per_peer():
    fleet = gpus(3)
    fleet[0].nvlink_peers = [bus(1), bus(1), bus(2)]
    fleet[1].nvlink_peers = [bus(0), bus(0)]
    facts = gather_nvml(FakeNvml(FakeMachine(gpus=fleet)))
    links = {(lk.a, lk.b): lk.nvlink_links for lk in facts.links}
    assert links == {(0, 1): 2, (0, 2): 1, (1, 2): 0}


def test_process_without_memory_figure():
    machine = FakeMachine(gpus=gpus(1))
    machine.gpus[0].processes = [(5, None)]
    [proc] = gather_nvml(FakeNvml(machine)).gpus[0].processes
    assert isinstance(proc.used_memory_bytes, Unavailable)


def test_missing_library_is_absent_with_an_explanation():
    facts = gather_nvml(FakeNvml(FakeMachine(init_error=12)))
    assert isinstance(facts, Unavailable) and facts.reason == "absent"
    assert "libnvidia-ml.so.1" in facts.detail


def test_driver_not_loaded_is_absent():
    facts = gather_nvml(FakeNvml(FakeMachine(init_error=9)))
    assert isinstance(facts, Unavailable) and facts.cause == "driver-not-loaded"


def test_other_init_errors_are_failures():
    facts = gather_nvml(FakeNvml(FakeMachine(init_error=999)))
    assert isinstance(facts, Unavailable) and facts.reason == "failed"


def test_gpu_lost_mid_way_keeps_what_was_gathered():
    fleet = gpus(4)
    fleet[2].lost_after = "memory"  # GPU 2 falls off the bus after its memory was read
    facts = gather_nvml(FakeNvml(FakeMachine(gpus=fleet)))
    assert isinstance(facts, NvmlFacts)
    assert [g.index for g in facts.gpus] == [0, 1, 3]  # the other GPUs still answer
    assert "NVML lost GPU 2" in facts.partial_error


def test_a_hanging_driver_becomes_a_timeout_fact():
    start = time.monotonic()
    facts = gather_nvml(FakeNvml(FakeMachine(hang_in_init=True)), timeout_s=0.3)
    assert time.monotonic() - start < 2
    assert isinstance(facts, Unavailable) and facts.cause == "timeout"


def test_missing_pynvml_module(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # what Python answers for a module not installed
    facts = gather_nvml()
    assert isinstance(facts, Unavailable) and facts.cause == "no-pynvml"
    assert "pip install nvidia-ml-py" in facts.detail


def test_a_pynvml_that_does_not_import_where_the_driver_library_is(monkeypatch):
    import builtins

    from mgpu_doctor.probes import nvml as probe

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(probe, "_library_loads", lambda: True)  # this machine may have no driver
    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    facts = gather_nvml()
    assert isinstance(facts, Unavailable) and facts.cause == "no-pynvml"
    assert "pip install nvidia-ml-py" in facts.detail


@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia"), reason="this machine has an NVIDIA driver")
def test_real_pynvml_without_a_driver_is_absent_not_a_crash():
    """This machine has nvidia-ml-py but no driver: the real module must be handled."""
    facts = gather_nvml()
    assert isinstance(facts, Unavailable) and facts.reason == "absent"


def test_without_the_driver_library_the_binding_is_not_even_imported():
    """No libnvidia-ml.so.1 (a machine without a driver): the same fact nvmlInit gives, and
    pynvml (a large module) is left unimported."""
    import ctypes
    import json
    import subprocess
    import sys

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        pytest.skip("an NVIDIA driver library is installed here")
    except OSError:
        pass
    code = ("import json, sys\n"
            "from mgpu_doctor.probes.nvml import gather_nvml\n"
            "fact = gather_nvml()\n"
            "print(json.dumps([fact.reason, fact.cause, fact.detail, 'pynvml' in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    reason, cause, detail, imported = json.loads(out)
    assert (reason, cause, imported) == ("absent", "library-not-found", False)
    assert detail.startswith("NVML library (libnvidia-ml.so.1) not found")
