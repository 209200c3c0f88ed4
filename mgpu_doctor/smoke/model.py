"""The smoke data model: what was planned (`SmokeSpec`) and what happened (`SmokeRun`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

LAYERS = ("dense", "conv2d", "lstm", "gru", "batchnorm", "embedding", "attention")
VARIANTS: dict[str, tuple[str, ...]] = {
    "lstm": ("cudnn", "generic"),
    "gru": ("cudnn", "generic"),
    "batchnorm": ("plain", "sync"),
}
SCENARIOS = ("even", "uneven_final_batch")
# Variants that train the very same thing as another where there is no cuDNN: on CPU devices
# Keras 3 takes the generic kernel for use_cudnn="auto" (keras/src/backend/tensorflow/rnn.py,
# cudnn_ok needs a GPU), and tf_keras runs the same non-cuDNN math.
SAME_WITHOUT_CUDNN: dict[tuple[str, str], str] = {("lstm", "cudnn"): "generic", ("gru", "cudnn"): "generic"}
# On one device, synchronized BatchNormalization computes the statistics of the plain layer (the
# one replica holds the global batch): one 1-device run is the reference for both variants.
SAME_ON_ONE_DEVICE: dict[tuple[str, str], str] = {("batchnorm", "sync"): "plain"}
# Layers whose training can change when a replica gets no sample in the last batch: batch
# statistics (BatchNormalization: NaN), and recurrent layers, which build their state from the
# batch size (the README cites a report). What every model shares with an empty replica (the
# loss, the gradient all-reduce) runs in these too.
EMPTY_REPLICA_LAYERS = ("batchnorm", "lstm", "gru")
STATUSES = ("ok", "hang", "crash", "error", "nan", "diverged", "oom")
DEVICE_KINDS = ("gpu", "cpu-virtual")


@dataclass(frozen=True)
class SmokeSpec:
    """One planned training: a layer (and variant) on ``devices`` devices in one scenario."""

    index: int
    layer: str
    variant: str
    devices: int
    device_kind: str  # "gpu" or "cpu-virtual" (logical CPU devices: simulated)
    scenario: str  # "even" or "uneven_final_batch"
    global_batch: int
    samples: int
    epochs: int
    virtual_devices: int = 0  # logical CPU devices configured in the child (cpu-virtual only)
    seed: int = 7

    @property
    def label(self) -> str:
        layer = f"{self.layer}-{self.variant}" if self.variant else self.layer
        return f"{layer} {self.devices}x{self.device_kind} {self.scenario} b{self.global_batch}"

    def to_child(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class SmokeRun:
    """What one smoke training did, with everything measured (JSON round trip via serde).

    ``status``: ok, hang, crash, error, nan (a non-finite loss or weight), diverged (the loss
    blew up while staying finite), oom (the kernel's OOM killer ended it: not the layer's fault).
    A run that died by a signal was tried once more; ``retried_after`` says how the first try ended.
    Losses are per epoch; ``None`` marks a non-finite value.
    The comparison fields (``speedup``, ``loss_vs_single``...) are filled on the N-device run
    from its 1-device twin (same layer, variant, scenario and global batch).
    """

    layer: str
    variant: str
    devices: int
    device_kind: str
    scenario: str
    status: str
    global_batch: int = 0
    samples: int = 0
    epochs: int = 0
    framework: str = ""  # "keras 3.15.1" or "tf_keras 2.21.0": what tf.keras resolved to
    losses: list[float | None] = field(default_factory=list)
    nonfinite_epoch: int | None = None
    weights_finite: bool | None = None
    replicas_identical: bool | None = None  # None: one device, or not measured
    replica_max_abs_diff: float | None = None
    median_step_s: float | None = None
    samples_per_s: float | None = None
    speedup: float | None = None  # N-device samples/s over 1-device samples/s
    scaling_efficiency: float | None = None  # speedup / devices
    loss_vs_single: float | None = None  # max relative loss difference to the 1-device run
    rss_mb: list[float] = field(default_factory=list)  # host RSS after each epoch
    rss_slope_mb_per_epoch: float | None = None
    gpu_memory_mb: list[float] = field(default_factory=list)
    gpu_memory_slope_mb_per_epoch: float | None = None
    error_type: str = ""
    error_message: str = ""
    signal: str = ""
    retried_after: str = ""  # "" unless a first attempt died by a signal: how it died
    stacks: str = ""  # every thread's Python stack when a hang was declared
    stderr_tail: str = ""
    duration_s: float = 0.0

    @property
    def name(self) -> str:
        """Stable identifier, also the check / JUnit testcase name."""
        layer = f"{self.layer}-{self.variant}" if self.variant else self.layer
        batch = f"/b{self.global_batch}" if self.global_batch else ""
        return f"smoke/{layer}/{self.devices}x{self.device_kind}/{self.scenario}{batch}"

    @property
    def simulated(self) -> bool:
        return self.device_kind == "cpu-virtual"


def runs_from_report(data: dict[str, object] | None, source: str) -> list[SmokeRun]:
    """The smoke runs recorded in a saved report (`check --format json`, `mgpu-doctor report`).

    Raises ValueError with the field at fault when they do not fit the schema.
    """
    from mgpu_doctor.serde import SchemaError, from_jsonable

    if not data or not data.get("smoke_runs"):
        return []
    try:
        return from_jsonable(list[SmokeRun], data["smoke_runs"], "report.smoke_runs")
    except SchemaError as exc:
        raise ValueError(f"{source}: field {exc.path}: {exc.message}") from None
