"""What a pasted text said, as snapshot data: the parts recognised, where each fact came from,
the log lines that prove something by themselves, and what could not be read."""

from __future__ import annotations

from mgpu_doctor.model.evidence import EvidenceLine
from mgpu_doctor.record import field, record


@record
class PastedPart:
    """One recognised output in the paste (``kind``: "nvidia-smi -q", "pip list", ...), its
    lines (1-based, inclusive), the facts read from it and its lines that could not be read."""

    kind: str
    first_line: int
    last_line: int
    facts: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)


@record
class PastedVersion:
    """A version the paste states, and where: "pasted: TensorFlow log, line 12"."""

    text: str
    source: str
    others: list[str] = field(default_factory=list)  # what other parts state: "8.0 (pasted: ..., line 5)"


@record
class LogLine:
    """A TensorFlow (or NCCL) log line that proves something by itself.

    ``kind``: ``loaded`` (a library opened), ``not-loaded`` (a library that did not load),
    ``runtime-mismatch`` (a library other than the one TensorFlow was built with), ``device``
    (a device TensorFlow created), ``found-device`` (a GPU it found), ``nccl-version``,
    ``cuinit-failed``, ``no-gpu`` (TensorFlow says it will not use a GPU).
    """

    line: int
    kind: str
    text: str
    library: str = ""
    loaded: str = ""
    compiled: str = ""
    repeated: int = 0  # how many more times the paste says the same (once per GPU, per process)


@record
class PastedImage:
    """A container image the paste names (``docker run``, ``FROM``, a tag typed in a template).

    ``kind``: ``tensorflow`` (Docker Hub's tensorflow/tensorflow, whose tag names the TensorFlow
    release), ``ngc`` (NVIDIA's nvcr.io images, whose tag is NVIDIA's release, not TensorFlow's),
    ``horovod`` (horovod/horovod, whose tag names Horovod's, TensorFlow's and Python's versions).
    """

    line: int
    image: str
    kind: str
    tensorflow: str = ""  # the TensorFlow release the tag names ("" where the tag does not say)


@record
class PastedLaunch:
    """A ``horovodrun``/``mpirun``/``mpiexec`` command line: a Horovod/MPI training of ``processes``
    processes (0: the line does not say), on ``hosts`` ("a:4", as typed)."""

    line: int
    tool: str
    processes: int
    hosts: list[str] = field(default_factory=list)
    text: str = ""


@record
class PastedFacts:
    """Everything the snapshot of a paste knows about the paste itself."""

    file: str
    parts: list[PastedPart]
    # tensorflow, keras, python, cuda, cudnn, nccl, driver, built_cuda, built_cudnn: the best
    # statement of each (a log line beats nvidia-smi, which beats a line typed in a template).
    versions: dict[str, PastedVersion]
    # snapshot field -> where its value was pasted ("nvml": "pasted: nvidia-smi -q, lines 3-80").
    provenance: dict[str, str]
    log: list[LogLine] = field(default_factory=list)
    other_lines: int = 0  # non-blank lines outside every recognised part (prose, code, tracebacks)
    # Lines that may show the failure (an exception, an error or warning line, a traceback's frames),
    # matched against the known issues' signatures.
    evidence: list[EvidenceLine] = field(default_factory=list)
    # Versions of a set-up the text calls old, previous or working ("this works: ...", "Old environment:"),
    # kept apart from what is installed: "tensorflow 1.15 (line 4: previous set-up)".
    previous: list[str] = field(default_factory=list)
    images: list[PastedImage] = field(default_factory=list)
    launches: list[PastedLaunch] = field(default_factory=list)
