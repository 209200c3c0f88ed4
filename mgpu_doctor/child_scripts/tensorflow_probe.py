"""Child script: TensorFlow's own view of this machine.

Imports TensorFlow and asks for its build and its *physical* devices. Never calls
device_lib.list_local_devices(), which creates a context on every GPU and allocates memory
on each before training starts. Python 3.6+; writes JSON to $MGPU_DOCTOR_RESULT.
"""

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

if __name__ == "__main__":
    _mgpu_child.start()  # first: die with the doctor, stacks on SIGUSR1 even in C code


GPU_LIBRARIES = (
    "libcuda.", "libcudart", "libcublas", "libcufft", "libcurand", "libcusolver",
    "libcusparse", "libcudnn", "libnccl", "libnvrtc", "libnvJitLink", "libnvinfer", "libcublasLt",
)


def keras_view(tf):
    """Which Keras `tf.keras` resolves to (Keras 3 or tf_keras) and its version."""
    try:
        module = tf.keras
    except Exception as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc)}
    name = getattr(module, "__name__", "") or ""
    version = getattr(module, "__version__", None)
    if version is None and hasattr(module, "version"):
        try:
            version = module.version()
        except Exception:
            version = None
    top = name.split(".")[0]
    return {"module": top or name, "full_module": name, "version": version}


def build_info_of(tf):
    """tf.sysconfig.get_build_info() (TensorFlow 2.3+); before, the module it reads,
    tensorflow.python.platform.build_info, under the names get_build_info gives them."""
    getter = getattr(tf.sysconfig, "get_build_info", None)
    if getter is not None:
        return dict((str(k), str(v)) for k, v in getter().items())
    from tensorflow.python.platform import build_info
    renamed = {"cuda_version_number": "cuda_version", "cudnn_version_number": "cudnn_version"}
    return dict((renamed.get(k, k), str(v)) for k, v in vars(build_info).items()
                if not k.startswith("_") and isinstance(v, (str, int, bool)))


def physical_devices_of(tf):
    """tf.config.list_physical_devices (2.1+), or its experimental form (1.14-2.0)."""
    lister = getattr(tf.config, "list_physical_devices", None)
    if lister is None:
        lister = tf.config.experimental.list_physical_devices
    return lister()


def main():
    caught = []
    start = time.time()
    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        try:
            import tensorflow as tf
        except BaseException as exc:  # SystemExit and friends from broken installs too
            _mgpu_child.write_result({
                "import_error": _mgpu_child.describe_exception(exc),
                "import_seconds": time.time() - start,
                "loaded_libraries": _mgpu_child.mapped_libraries(GPU_LIBRARIES),
            })
            return
        import_seconds = time.time() - start
        caught.extend(str(w.message) for w in recorded)
    after_import = _mgpu_child.mapped_libraries(GPU_LIBRARIES)
    try:
        build_info = build_info_of(tf)
    except Exception as exc:
        build_info = {"error": "%s: %s" % (type(exc).__name__, exc)}
    try:
        built_with_cuda = bool(tf.test.is_built_with_cuda())
    except Exception:
        built_with_cuda = None
    devices = []
    device_error = None
    try:
        for dev in physical_devices_of(tf):
            details = {}
            if dev.device_type == "GPU":
                try:
                    raw = tf.config.experimental.get_device_details(dev)
                    details = dict((str(k), str(v)) for k, v in raw.items())
                except Exception as exc:
                    details = {"error": "%s: %s" % (type(exc).__name__, exc)}
            devices.append({"name": dev.name, "device_type": dev.device_type, "details": details})
    except Exception as exc:
        device_error = _mgpu_child.describe_exception(exc)
    _mgpu_child.write_result({
        "version": tf.__version__,
        "module_path": os.path.dirname(getattr(tf, "__file__", "") or ""),
        "keras": keras_view(tf),
        "build_info": build_info,
        "built_with_cuda": built_with_cuda,
        "physical_devices": devices,
        "device_error": device_error,
        "loaded_libraries": _mgpu_child.mapped_libraries(GPU_LIBRARIES),
        "loaded_after_import": after_import,
        "import_seconds": import_seconds,
        "warnings": caught[:20],
    })


if __name__ == "__main__":
    main()
