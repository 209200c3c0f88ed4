"""What a thread, and a process, waits for, read from its frames. Pure.

The frame patterns were taken from real dumps of the scenarios the tests run (TensorFlow 2.21,
Keras 3.15, Python 3.11): a MultiWorkerMirroredStrategy peer stopped (eager ``strategy.reduce``
waits in ``cross_device_ops.py`` / ``collective_ops.py``; a ``tf.function`` step waits in
``eager/execute.py`` ``quick_execute``, where its all-reduce runs), a cluster whose peer never came up
(``Context.ensure_initialized`` under ``collective_all_reduce_strategy.py``), a blocked ``tf.data``
generator (``iterator_ops.py`` in the main thread, ``from_generator_op.py`` in TensorFlow's), and a
``PyDataset`` whose worker processes never answer (``py_dataset_adapter.py`` ``OrderedEnqueuer.get``
on a ``multiprocessing`` pool result).
"""

from __future__ import annotations

from mgpu_doctor.model.hang import Frame, ProcessReading, ThreadStack
from mgpu_doctor.record import record

# The kinds, most telling first: a process is said to wait for the first kind any of its threads shows.
COLLECTIVE, STARTUP, CHECKPOINT, INPUT, GRAPH, PYTHON, LOCK, BACKGROUND = (
    "collective", "startup", "checkpoint", "input", "graph", "python", "lock", "background")
ORDER = (COLLECTIVE, STARTUP, CHECKPOINT, INPUT, GRAPH, PYTHON, LOCK, BACKGROUND)
WHAT = {
    COLLECTIVE: "a collective (all-reduce, broadcast, all-gather)",
    STARTUP: "the cluster start-up (gRPC servers, collective ops)",
    CHECKPOINT: "checkpoint I/O",
    INPUT: "the input pipeline",
    GRAPH: "a TensorFlow function (the step's graph: its compute, and its all-reduce under a strategy)",
    PYTHON: "Python code",
    LOCK: "a lock, event or queue",
    BACKGROUND: "nothing (a helper thread)",
}


@record
class Rule:
    kind: str
    file: str  # a part of the frame's file (`distribute/cross_device_ops.py`, `horovod/`)
    name: str = ""  # a part of the function's name; "" for any function of the file
    innermost: bool = False  # only the thread's innermost frame (an idle pool thread waiting for work)


# Checked in this order against each frame of a thread, innermost first; the first rule any frame
# matches decides (with the innermost frame it matches), so the more telling rules come first.
# Helper threads that wait whether the job is healthy or not (a pool's handlers, a PyDataset's
# producer) come after what can only be a real wait and before the input pipeline their frames
# also belong to.
RULES = (
    Rule(COLLECTIVE, "distribute/cross_device_ops.py"),
    Rule(COLLECTIVE, "distribute/cross_device_utils.py"),
    Rule(COLLECTIVE, "ops/collective_ops.py"),
    Rule(COLLECTIVE, "ops/gen_collective_ops.py"),
    Rule(COLLECTIVE, "ops/nccl_ops.py"),
    Rule(COLLECTIVE, "horovod/"),
    Rule(STARTUP, "eager/context.py", "ensure_initialized"),
    Rule(STARTUP, "eager/context.py", "enable_collective_ops"),
    Rule(STARTUP, "training/server_lib.py"),
    Rule(STARTUP, "distribute/collective_all_reduce_strategy.py", "_initialize_multi_worker"),
    Rule(CHECKPOINT, "tensorflow/python/checkpoint/"),
    Rule(CHECKPOINT, "tensorflow/python/saved_model/"),
    Rule(CHECKPOINT, "tensorflow/python/training/saver.py"),
    Rule(CHECKPOINT, "keras/src/saving/"),
    Rule(CHECKPOINT, "callbacks/model_checkpoint.py"),
    Rule(CHECKPOINT, "callbacks/backup_and_restore.py"),
    Rule(CHECKPOINT, "h5py/"),
    Rule(BACKGROUND, "multiprocessing/pool.py", "Pool._handle_"),
    Rule(BACKGROUND, "data_adapters/py_dataset_adapter.py", "OrderedEnqueuer._run"),
    Rule(BACKGROUND, "concurrent/futures/thread.py", "_worker", innermost=True),
    Rule(INPUT, "data_adapters/"),  # Keras's own input code first: it names the PyDataset's wait
    Rule(INPUT, "utils/data_utils.py"),
    Rule(INPUT, "data/ops/iterator_ops.py"),
    Rule(INPUT, "data/ops/from_generator_op.py"),
    Rule(INPUT, "ops/script_ops.py"),
    Rule(INPUT, "multiprocessing/pool.py"),
    Rule(INPUT, "multiprocessing/queues.py"),
    Rule(GRAPH, "eager/execute.py", "quick_execute"),
    *(Rule(LOCK, "threading.py", name) for name in ("acquire", "wait", "join", "Lock", "Semaphore")),
    *(Rule(LOCK, "queue.py", name) for name in ("get", "put")),
    Rule(LOCK, "multiprocessing/synchronize.py"),
    Rule(LOCK, "multiprocessing/connection.py"),
    Rule(LOCK, "selectors.py"),
)


@record
class Wait:
    """What one thread (or a whole process) waits for, and the frame that says so."""

    kind: str
    thread: str
    frame: Frame | None  # None: an empty stack, or no stack at all
    active: bool = False  # the thread was on a CPU when dumped

    @property
    def rank(self) -> float:
        """Its place in ORDER; Python code that is not on a CPU (a C call that blocks: a bare
        ``lock.acquire()``) tells less than a known lock frame, so it comes after them."""
        if self.kind == PYTHON and not self.active:
            return ORDER.index(LOCK) + 0.5
        return ORDER.index(self.kind)

    @property
    def what(self) -> str:
        return WHAT[self.kind]


def own_frames(thread: ThreadStack) -> list[Frame]:
    """The thread's frames up to a forked process's start: past ``BaseProcess._bootstrap`` lie the
    frames of the parent that forked it (a PyDataset worker still shows the parent's
    ``OrderedEnqueuer._run``), which say nothing of what this process waits for."""
    for at, frame in enumerate(thread.frames):
        if frame.name.endswith("_bootstrap") and "multiprocessing/process.py" in frame.file:
            return thread.frames[:at + 1]
    return thread.frames


def thread_wait(thread: ThreadStack) -> Wait:
    frames = own_frames(thread)
    for rule in RULES:
        for frame in frames[:1] if rule.innermost else frames:
            if _matches(rule, frame):
                return Wait(rule.kind, thread.name, frame, thread.active)
    innermost = thread.frames[0] if thread.frames else None
    return Wait(PYTHON if innermost is not None else BACKGROUND, thread.name, innermost, thread.active)


def _matches(rule: Rule, frame: Frame) -> bool:
    return rule.file in frame.file and rule.name in frame.name


def process_wait(process: ProcessReading) -> Wait | None:
    """The most telling wait among the process's threads (the main thread first on a tie); None
    without a stack."""
    if not isinstance(process.threads, list) or not process.threads:
        return None
    waits = [thread_wait(t) for t in process.threads]
    main = [w for w, t in zip(waits, process.threads, strict=True) if t.thread_id == process.pid]
    ranked = sorted(waits, key=lambda w: (w.rank, w not in main))
    return ranked[0]


def thread_lines(process: ProcessReading, limit: int = 6) -> list[str]:
    """Each thread that is not a helper: its name, what it waits for, the deciding frame."""
    if not isinstance(process.threads, list):
        return []
    lines = []
    for thread in process.threads:
        wait = thread_wait(thread)
        if wait.kind == BACKGROUND:
            continue
        name = thread.name or f"thread {thread.thread_id}"
        inner = thread.frames[0] if thread.frames else None
        lines.append(f"{name}: {wait.kind}" + (f" at {wait.frame}" if wait.frame else "")
                     + (f"; innermost {inner}" if inner is not None and inner != wait.frame else ""))
    return lines[:limit]
