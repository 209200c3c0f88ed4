"""Child script: JAX's own view of this machine.

Imports JAX and asks for its version, its CUDA plugin and the devices it sees. The parent starts
it with XLA_PYTHON_CLIENT_PREALLOCATE=false so that creating the GPU client does not take 75 % of
every GPU's memory (JAX's default); nothing is computed on a device. Python 3.6+ syntax (JAX itself
needs a newer Python: on an old one the import fails and says so); writes JSON to
$MGPU_DOCTOR_RESULT.
"""

import logging
import os
import re
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

if __name__ == "__main__":
    _mgpu_child.start()  # first: die with the doctor, stacks on SIGUSR1 even in C code


GPU_LIBRARIES = (
    "libcuda.", "libcudart", "libcublas", "libcufft", "libcusolver", "libcusparse", "libcudnn",
    "libnccl", "libnvJitLink", "libcublasLt", "pjrt", "xla_cuda",
)
PLUGIN_DIST = re.compile(r"^jax[-_]cuda\d+[-_](plugin|pjrt)$", re.I)


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def plugin_distributions():
    """{distribution: version} of the installed jax-cuda*-plugin / jax-cuda*-pjrt wheels."""
    try:
        from importlib import metadata
    except ImportError:
        return {}
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if PLUGIN_DIST.match(name):
            found[canonical(name)] = dist.version
    return found


def missing_plugin_wheels(plugins):
    """The distributions a plugin's `with-cuda` extra requires that are not installed."""
    try:
        from importlib import metadata
    except ImportError:
        return []
    missing = []
    for name in sorted(plugins):
        if not name.endswith("-plugin"):
            continue
        try:
            requires = metadata.requires(name) or []
        except Exception:
            continue
        for line in requires:
            if "with-cuda" not in line.partition(";")[2]:
                continue
            wanted = re.match(r"[A-Za-z0-9_.-]+", line)
            if not wanted:
                continue
            try:
                metadata.version(wanted.group(0))
            except Exception:
                if canonical(wanted.group(0)) not in missing:
                    missing.append(canonical(wanted.group(0)))
    return missing


class _Collect(logging.Handler):
    def __init__(self):
        logging.Handler.__init__(self, logging.WARNING)
        self.lines = []

    def emit(self, record):
        try:
            self.lines.append(record.getMessage())
        except Exception:
            pass


def main():
    collected = _Collect()
    logging.getLogger("jax").addHandler(collected)
    start = time.time()
    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        try:
            import jax
        except BaseException as exc:  # SystemExit and friends from broken installs too
            _mgpu_child.write_result({
                "import_error": _mgpu_child.describe_exception(exc),
                "import_seconds": time.time() - start,
            })
            return
        import_seconds = time.time() - start
        try:
            import jaxlib
            jaxlib_version = getattr(jaxlib, "__version__", None)
            if jaxlib_version is None:
                from jaxlib import version as _jaxlib_version
                jaxlib_version = _jaxlib_version.__version__
        except Exception:
            jaxlib_version = None
        devices = []
        device_error = None
        backend = None
        try:
            for dev in jax.devices():
                devices.append({
                    "id": int(dev.id), "platform": str(dev.platform),
                    "device_kind": str(getattr(dev, "device_kind", "")),
                    "local_hardware_id": getattr(dev, "local_hardware_id", None),
                })
            backend = jax.default_backend()
        except Exception as exc:
            device_error = _mgpu_child.describe_exception(exc)
        said = [str(w.message) for w in recorded]
    backend_errors = {}
    try:
        from jax._src import xla_bridge  # private: what a backend that failed said
        backend_errors = dict((str(k), str(v)) for k, v in getattr(xla_bridge, "_backend_errors", {}).items())
    except Exception:
        pass
    plugins = plugin_distributions()
    _mgpu_child.write_result({
        "version": jax.__version__,
        "jaxlib_version": jaxlib_version,
        "module_path": os.path.dirname(getattr(jax, "__file__", "") or ""),
        "plugins": plugins,
        "plugin_wheels_missing": missing_plugin_wheels(plugins),
        "default_backend": backend,
        "devices": devices,
        "device_error": device_error,
        "backend_errors": backend_errors,
        "loaded_libraries": _mgpu_child.mapped_libraries(GPU_LIBRARIES),
        "import_seconds": import_seconds,
        "warnings": (said + collected.lines)[:20],
    })


if __name__ == "__main__":
    main()
