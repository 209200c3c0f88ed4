"""Gather a whole snapshot: every probe, in order, with progress on stderr."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from mgpu_doctor import __version__
from mgpu_doctor.model.snapshot import KIND, SCHEMA_VERSION, Snapshot
from mgpu_doctor.model.unavailable import Unavailable, failed, interpreter_broken, skipped
from mgpu_doctor.probes.collective import gather_collective
from mgpu_doctor.probes.envvars import gather_env
from mgpu_doctor.probes.host import gather_host
from mgpu_doctor.probes.jax_view import gather_jax, jax_installed
from mgpu_doctor.probes.libraries import LibraryProbeInput, gather_libraries
from mgpu_doctor.probes.nvml import gather_nvml
from mgpu_doctor.probes.packages import gather_python_and_packages
from mgpu_doctor.probes.tensorflow import gather_tensorflow, tensorflow_installed
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import record, replace


@record
class GatherOptions:
    interpreter: Interpreter
    quick: bool = False  # no child that imports TensorFlow
    nvml_module: Any = None  # None: import pynvml
    tf_timeout_s: float = 120.0
    jax_timeout_s: float = 120.0


Progress = Callable[..., None]  # (step, slow=False)


def gather_snapshot(options: GatherOptions, progress: Progress = lambda *_a, **_k: None) -> Snapshot:
    progress("host and environment")
    host = gather_host()
    env = gather_env()
    collective = gather_collective()
    progress("NVML")
    nvml = gather_nvml(options.nvml_module)
    progress(f"packages of {options.interpreter.executable}")
    python, packages, libc = gather_python_and_packages(options.interpreter)
    if libc and not isinstance(python, Unavailable) and not python.is_doctor_interpreter:
        host = _with_libc(host, libc)
    reported = "" if isinstance(python, Unavailable) else python.executable
    options = replace(options, interpreter=options.interpreter.as_reported(reported))
    installed = tensorflow_installed(packages)
    if options.quick and installed is not False:
        tensorflow: Any = skipped("--quick: TensorFlow is not imported", cause="quick")
    else:
        if installed is not False:  # nothing is imported when it is not installed
            progress("TensorFlow: importing it in a child process (a few seconds)", slow=True)
        tensorflow = gather_tensorflow(options.interpreter, packages, options.tf_timeout_s)
    progress("CUDA libraries" + ("" if options.quick else ": loading each to read its version"))
    libraries = gather_library_facts(options, python, tensorflow)
    if not options.quick and jax_installed(packages) is not False:
        progress("JAX: importing it in a child process, without preallocation", slow=True)
    jax = gather_jax(options.interpreter, packages, options.quick, options.jax_timeout_s)
    return Snapshot(
        schema_version=SCHEMA_VERSION,
        kind=KIND,
        tool_version=__version__,
        created=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),  # ISO 8601, UTC, seconds
        host=host,
        python=python,
        packages=packages,
        env=env,
        nvml=nvml,
        tensorflow=tensorflow,
        libraries=libraries,
        collective=collective,
        jax=jax,
    )


def gather_library_facts(options: GatherOptions, python: Any, tensorflow: Any) -> Any:
    """Library discovery; with --quick from the file system alone (no library is loaded)."""
    site_packages = [] if isinstance(python, Unavailable) else list(python.site_packages)
    loaded = [] if isinstance(tensorflow, Unavailable) else \
        list(tensorflow.loaded_libraries) + list(tensorflow.loaded_after_import)
    probe_input = LibraryProbeInput(env=dict(os.environ), site_packages=site_packages,
                                    loaded_by_tensorflow=loaded)
    load = not options.quick and not interpreter_broken(python)  # loads run under that Python
    try:
        return gather_libraries(probe_input, options.interpreter, load_versions=load)
    except (OSError, ValueError) as exc:  # a probe failure is a fact, never a traceback
        return failed(f"library discovery failed: {type(exc).__name__}: {exc}",
                      cause=f"exception:{type(exc).__name__}")


def _with_libc(host: Any, libc: str) -> Any:
    return replace(host, libc=libc)
