"""Failures whose line names a mechanism many causes share (out of GPU memory, NCCL, a lost gRPC
peer, cuDNN that could not start, a per-replica value where a tensor was wanted): what the line
means and what to look at next, for a failure no known issue's signature names.

This is the doctor's own general advice, not a known issue: the finding says so.
"""

from __future__ import annotations

from mgpu_doctor.matrix.signatures import normalised, pieces_in
from mgpu_doctor.record import record


@record
class Mechanism:
    """A class of failure recognised by any of its lines (each a tuple of pieces, in order).

    ``alone``: a line of it is a failure even when it is no exception (an issue's title, an NCCL
    error line); a library that did not load is not, as TensorFlow logs optional ones (TensorRT)
    that way and the pasted log's own check judges each.
    """

    name: str
    what: str  # what the line means
    fix: str
    lines: tuple[tuple[str, ...], ...]
    links: tuple[str, ...] = ()
    alone: bool = True


MECHANISMS: tuple[Mechanism, ...] = (
    # Before the GPU's: the Linux kernel's OOM killer also says "Out of memory" ("Out of memory:
    # Killed process 4242 (python)", "python invoked oom-killer"), about the machine's RAM.
    Mechanism(
        "host-out-of-memory", "the machine's memory (RAM, not the GPU's) ran out and the kernel's OOM "
        "killer ended a process",
        "Find what grew (`dmesg` names the killed process and its size): a dataset or shuffle buffer held "
        "in RAM, several data-loading worker processes each copying it, or host memory that grows every "
        "epoch (a leak: `mgpu-doctor smoke` measures memory growth). Lower the workers or the buffers, or "
        "give the job more memory (a container's or Slurm's limit: --mem).",
        # "Kill process ... or sacrifice child" before Linux 4.19, "Killed process" since.
        (("out of memory: kill",), ("invoked oom-killer",), ("oom-kill:",), ("oom_reaper",)),
        ("https://www.kernel.org/doc/gorman/html/understand/understand016.html",)),
    Mechanism(
        "out-of-memory", "the GPU ran out of memory",
        "Lower the batch size per replica (the global batch divided by the number of GPUs), let "
        "TensorFlow grow its memory instead of taking it all (TF_FORCE_GPU_ALLOW_GROWTH=true), and "
        "check that no other process holds the GPUs' memory (`mgpu-doctor check` shows memory in use).",
        (("oom when allocating",), ("resourceexhaustederror",), ("cuda_error_out_of_memory",),
         ("cuda out of memory",), ("ran out of memory trying to allocate",), ("out of memory",)),
        ("https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth",)),
    Mechanism(
        "cudnn-start", "cuDNN (or cuBLAS) could not start on the GPU",
        "Most often the GPU's memory was already taken when cuDNN created its handle: set "
        "TF_FORCE_GPU_ALLOW_GROWTH=true and rerun; else the cuDNN found is not the one TensorFlow was "
        "built with (`mgpu-doctor check` compares them).",
        (("cudnn_status_internal_error",), ("could not create cudnn handle",),
         ("failed to get convolution algorithm",), ("cudnn_status_not_initialized",),
         ("cublas_status_not_initialized",), ("failed to create cublas handle",)),
        ("https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth",)),
    Mechanism(
        "nccl", "NCCL, which exchanges the gradients between GPUs, failed",
        "Rerun with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET) to see which call failed; the usual "
        "causes are a small /dev/shm in a container, the wrong network interface (NCCL_SOCKET_IFNAME), "
        "and peer-to-peer transfers that the PCIe/IOMMU set-up blocks: `mgpu-doctor check` checks these.",
        # With ncclGetErrorString's text for ncclRemoteError, which wrappers quote without "NCCL error"
        # (XGBoost: "NCCL failure: remote process exited ...").
        (("unhandled system error",), ("unhandled cuda error",), ("ncclinternalerror",), ("nccl error",),
         ("ncclsystemerror",), ("ncclunhandledcudaerror",), ("ncclremoteerror",),
         ("ncclcomminitrank failed",), ("remote process exited or there was a network error",)),
        ("https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html",)),
    Mechanism(
        "grpc-peer", "a worker of the cluster went away or could not be reached",
        "The first worker that failed holds the real error in its own log: read that one. Check that "
        "every worker is up, that the TF_CONFIG addresses are reachable from each other, and that no "
        "proxy stands between them (`mgpu-doctor check` tests the route).",
        (("recvasync is cancelled",), ("failed to connect to all addresses",), ("unavailableerror",),
         ("socket closed",), ("deadline_exceeded",), ("deadline exceeded",), ("connection reset by peer",)),
        ("https://www.tensorflow.org/guide/distributed_training",)),
    Mechanism(
        "per-replica",
        "a per-replica value reached code that wants one tensor, or a call that must run once for all "
        "replicas ran inside one replica (tf.distribute's replica and cross-replica contexts mixed)",
        "Inside a strategy, values returned from strategy.run are per replica: reduce them "
        "(strategy.reduce) or take strategy.experimental_local_results before using them as one "
        "tensor. A call that needs the cross-replica context (strategy.run and strategy.reduce, "
        "Keras' fit and train_on_batch) is made outside the function given to strategy.run, or from "
        "inside it through tf.distribute.get_replica_context().merge_call(). With Keras 3, compare your "
        "versions against the known issues (`mgpu-doctor matrix query keras==X "
        "strategy=multi_worker_mirrored`).",
        # The second: tf.distribute's RuntimeError (distribute_lib.py,
        # _require_cross_replica_or_default_context_extended) for a cross-replica call in a replica.
        (("perreplica",), ("requires being in cross-replica context",)),
        ("https://www.tensorflow.org/api_docs/python/tf/distribute/Strategy#reduce",)),
    Mechanism(
        "driver-too-old", "the driver is older than the CUDA runtime needs",
        "Install a driver at least as new as the CUDA runtime's minimum (NVIDIA's CUDA release notes list "
        "it per version), or use a TensorFlow built for an older CUDA; `mgpu-doctor check` compares the "
        "driver with the CUDA runtime in use.",
        (("driver version is insufficient for cuda runtime version",), ("cudaerrorinsufficientdriver",),
         ("cuda_error_system_driver_mismatch",),
         ("forward compatibility was attempted on non supported hw",)),
        ("https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/",)),
    Mechanism(
        "library-load", "a shared library could not be loaded",
        "Install the CUDA and cuDNN versions this TensorFlow was built for (with pip, from TensorFlow "
        "2.14: `pip install tensorflow[and-cuda]`), or put the directory holding the named file on "
        "LD_LIBRARY_PATH; `mgpu-doctor check` lists which copies the loader finds.",
        (("could not load dynamic library",), ("cannot open shared object file",),
         ("undefined symbol",), ("dlopen",)),
        ("https://www.tensorflow.org/install/pip",), alone=False),
)


def mechanism_of(text: str) -> Mechanism | None:
    """The first mechanism one of whose lines ``text`` holds."""
    line = normalised(text)
    return next((m for m in MECHANISMS if any(pieces_in(p, line) for p in m.lines)), None)
