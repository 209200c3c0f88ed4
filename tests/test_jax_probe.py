"""The JAX probe: a real child (with real JAX where the test venv has it), and its result parsing."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys

import pytest

from mgpu_doctor.model.snapshot import JaxFacts, PackageFacts
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.probes.jax_view import gather_jax, parse_jax_result
from mgpu_doctor.process.interpreter import Interpreter

HAS_JAX = importlib.util.find_spec("jax") is not None
# CI installs the test extra, which has jax: there a missing JAX is a failure, not a skip.
needs_jax = pytest.mark.skipif(not HAS_JAX and not os.environ.get("CI"), reason="jax is not installed")

WITH_JAX = PackageFacts({"jax": "0.10.2", "jaxlib": "0.10.2"}, {}, {})


def test_not_installed_is_absent_without_a_child():
    facts = gather_jax(Interpreter("/nonexistent/python"), PackageFacts({}, {}, {}))
    assert isinstance(facts, Unavailable) and facts.reason == "absent" and facts.cause == "not-installed"


def test_quick_imports_nothing():
    facts = gather_jax(Interpreter("/nonexistent/python"), WITH_JAX, quick=True)
    assert isinstance(facts, Unavailable) and facts.cause == "quick"


def test_the_child_runs_without_preallocation(tmp_path):
    """A stand-in interpreter (a real process) reports the environment it was given."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nprintf '{\"import_error\": {\"type\": \"Env\", \"message\": \"%s\"}}' "
                    "\"$XLA_PYTHON_CLIENT_PREALLOCATE\" > \"$MGPU_DOCTOR_RESULT\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    facts = gather_jax(Interpreter(str(fake)), WITH_JAX, environ={"XLA_PYTHON_CLIENT_PREALLOCATE": "true"})
    assert isinstance(facts, Unavailable) and facts.detail == "Env: false"


def test_a_crashing_child_is_a_failed_fact(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nkill -SEGV $$\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    facts = gather_jax(Interpreter(str(fake)), WITH_JAX)
    assert isinstance(facts, Unavailable) and facts.reason == "failed" and facts.cause == "signal:SIGSEGV"


def test_parse_result_with_a_device_error():
    facts = parse_jax_result({"version": "0.10.2", "jaxlib_version": "0.10.2", "plugins": {},
                              "devices": [], "device_error": {"type": "RuntimeError", "message": "no cuda"}})
    assert isinstance(facts.devices, Unavailable) and "no cuda" in facts.devices.detail


def test_malformed_result_is_a_failed_fact(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho '{\"devices\": 3}' > \"$MGPU_DOCTOR_RESULT\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    facts = gather_jax(Interpreter(str(fake)), WITH_JAX)
    assert isinstance(facts, Unavailable) and facts.cause == "bad-result"


@needs_jax
def test_real_jax_on_virtual_cpu_devices():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=3", "JAX_PLATFORMS": "cpu"}
    facts = gather_jax(Interpreter(sys.executable), WITH_JAX, environ=env)
    assert isinstance(facts, JaxFacts), facts
    assert facts.default_backend == "cpu"
    assert [d.platform for d in facts.devices] == ["cpu"] * 3
    import jax  # the test process may import it: only the doctor may not

    assert facts.version == jax.__version__
