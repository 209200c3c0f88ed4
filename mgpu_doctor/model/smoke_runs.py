"""The smoke data model: what was planned (`SmokeSpec`) and what happened (`SmokeRun`), with the
steps of a checkpoint run; the layers and their traits are one table in `smoke/layers.py`."""

from __future__ import annotations

from collections.abc import Iterable

from mgpu_doctor.record import asdict, field, record

# Statuses of a checkpoint run besides the training's own (error, crash, hang, oom).
CHECKPOINT_STATUSES = ("save-failed", "load-failed", "reload-differs", "resume-failed")
# Predictions after a reload, and final weights after a resume, may differ from the original by
# this much relative to the largest value (absolute below 1): the same weights on other devices
# give the same float32 sums up to reordering, far below this; a weight that was not restored is
# off by the learning rate's steps, far above it.
RELOAD_TOLERANCE = 1e-5
# The ways of training the matrix's entries name for each scenario (`usage` in known issues).
SCENARIO_USAGE: dict[str, tuple[str, ...]] = {
    "checkpoint": ("save_model", "load_weights", "checkpoint"),
    "resume": ("checkpoint",),
    # the leak probe (smoke/leak.py) calls fit, predict and evaluate over and over in one process
    "leak_probe": ("fit_in_loop", "predict_in_loop", "predict_evaluate"),
}


@record
class UsageScenario:
    """One way of training the smoke trains (smoke/usage.py): its scenario name, the matrix's usage
    words it exercises, its title."""

    name: str
    usage: tuple[str, ...]
    title: str
    # 1 vs N loss agreement: float16 activations and gradients round differently on N replicas.
    loss_tolerance: float | None = None


USAGE_SCENARIOS: dict[str, UsageScenario] = {s.name: s for s in (
    UsageScenario("mixed_precision", ("mixed_precision",),
                  "mixed_float16 policy with loss scaling (LossScaleOptimizer)", loss_tolerance=2e-2),
    UsageScenario("jit_compile", ("jit_compile",), "compiled with XLA (jit_compile=True)"),
    UsageScenario("custom_training_loop", ("custom_training_loop", "distribute_dataset"),
                  "custom loop: strategy.run over experimental_distribute_dataset, GradientTape, "
                  "SGD with momentum"),
    UsageScenario("distribute_dataset", ("distribute_dataset",),
                  "model.fit on strategy.experimental_distribute_dataset"),
)}


def variant_name(layer: str, variant: str) -> str:
    """A layer and its variant as one word of run names and labels: "lstm-cudnn", "dense"."""
    return f"{layer}-{variant}" if variant else layer


@record
class CheckpointStep:
    """One save, load or resume of a checkpoint run, as the child did it."""

    format: str  # keras, weights, tf_checkpoint, savedmodel, h5, backup_and_restore
    stage: str  # save, load, resume (reference: the uninterrupted training failed)
    load_devices: int = 0  # devices the model was loaded (or resumed) on; 0 for a save
    ok: bool = False  # the step itself ran; its comparison is judged apart
    max_abs_diff: float | None = None  # predictions (load) or final weights (resume) vs the original
    max_abs_reference: float | None = None
    resumed_at_epoch: int | None = None  # 0-based first epoch after the restart (resume)
    killed_in_epoch: int | None = None  # 1-based
    error: str = ""
    # The user's model only: the error this format gives it on one device without a strategy too,
    # the format's limit for that model (HDF5 and a subclassed model in Keras 2), not the devices'.
    model_limit: str = ""

    @property
    def failed(self) -> bool:
        """The step did not run, for another reason than the model's own limit with the format."""
        return not self.ok and not self.model_limit

    @property
    def tolerance(self) -> float:
        return RELOAD_TOLERANCE * max(1.0, self.max_abs_reference or 0.0)

    @property
    def differs(self) -> bool:
        return self.ok and (self.max_abs_diff is None or self.max_abs_diff > self.tolerance)

    @property
    def restarted_from_scratch(self) -> bool:
        return self.stage == "resume" and self.ok and self.resumed_at_epoch != (self.killed_in_epoch or 0) - 1


@record
class LeakCycle:
    """One call of the leak probe (smoke/leak.py): which phase and cycle, and the memory after it."""

    phase: str  # fit, predict, evaluate
    cycle: int  # 0-based, within its phase
    # host memory no file backs (RssAnon) after the call, MiB: a fork's full RSS also grows by every
    # page of TensorFlow's libraries it touches first
    rss_anon_mb: float | None = None
    gpu_mb: float | None = None  # MiB TensorFlow's allocator holds on the run's GPUs; None: not measured
    seconds: float = 0.0  # the call itself


@record
class InputRound:
    """One round of the input-bound probe (smoke/input_bound.py): the pipeline alone as given, for
    ``seconds`` past its first batch, then the step on the run's devices fed from memory."""

    input_samples_per_s: float | None = None
    compute_samples_per_s: float | None = None
    batches: int = 0  # the pipeline's batches measured (its first left out)
    seconds: float = 0.0  # the pipeline's measured time
    # the dataset's length in batches where it ended before the time was up and was measured on as
    # dataset.repeat(); None: it did not end
    dataset_batches: int | None = None

    @property
    def headroom(self) -> float | None:
        supply, demand = self.input_samples_per_s, self.compute_samples_per_s
        return supply / demand if supply is not None and demand else None


SCENARIOS = ("even", "uneven_final_batch")
LEAK_SCENARIO = "leak_probe"  # fit, predict and evaluate called over and over (smoke/leak.py)
STATUSES = ("ok", "hang", "crash", "error", "nan", "diverged", "oom", "skipped") + CHECKPOINT_STATUSES
DEVICE_KINDS = ("gpu", "cpu-virtual")


@record
class NonfiniteOrigin:
    """Where a run's first NaN or Inf came from (child_scripts/_smoke_nonfinite.py).

    ``kind``: "layer" (its output), "loss", "variable" (a moving mean or variance, a weight), "step"
    (the step's loss was the first value seen non-finite; the step could not be replayed layer by
    layer for this model), "" (not found). ``how``: "replayed" (the step run again from
    the weights before it, layer by layer on each replica) or "watched" (seen after each step)."""

    kind: str = ""
    name: str = ""  # the layer's name, the loss function's, or the variable's path
    layer_class: str = ""
    value: str = ""  # "NaN" or "Inf"
    epoch: int | None = None  # 1-based, with ``step``: the first step that made it
    step: int | None = None
    replica: int | None = None  # 0-based: the first replica where it appeared
    replicas: int = 0
    on_replicas: list[int] = field(default_factory=list)
    batch_shapes: list[list[int | None]] = field(default_factory=list)  # each replica's inputs at that step
    also: list[str] = field(default_factory=list)  # other variables non-finite at the same step
    how: str = ""
    error: str = ""  # why it could not be located

    @property
    def replica_shape(self) -> list[int | None] | None:
        if self.replica is None or self.replica >= len(self.batch_shapes):
            return None
        return self.batch_shapes[self.replica]


@record
class SmokeSpec:
    """One planned training: a layer (and variant) on ``devices`` devices in one scenario."""

    index: int
    layer: str
    variant: str
    devices: int
    device_kind: str  # "gpu" or "cpu-virtual" (logical CPU devices: simulated)
    scenario: str  # "even", "uneven_final_batch"; "checkpoint", "resume" (smoke/checkpoint.py)
    global_batch: int
    samples: int
    epochs: int
    virtual_devices: int = 0  # logical CPU devices configured in the child (cpu-virtual only)
    seed: int = 7
    model_size: int = 1  # width multiplier of the layer's units, filters or dimensions
    # Also time the input pipeline alone and the step with the batch already in memory.
    input_probe: bool = False
    cycles: int = 0  # the leak probe: calls of fit, then of predict, then of evaluate
    # The user's own model (`smoke --model`, layer USER_MODEL): MODULE:FUNCTION of the model and of
    # its data ("" for synthetic data), and the directories put first on the child's sys.path.
    user_model: str = ""
    user_data: str = ""
    model_path: str = ""
    # The user's model on 1 device: trained once more with each batch split as this many replicas
    # split it (child_scripts/_smoke_split.py), the size of the 1-vs-N difference its layers explain.
    split_replicas: int = 0

    @property
    def label(self) -> str:
        size = f" w{self.model_size}" if self.model_size != 1 else ""
        return (f"{variant_name(self.layer, self.variant)} {self.devices}x{self.device_kind} "
                f"{self.scenario} b{self.global_batch}{size}")

    def to_child(self) -> dict[str, object]:
        return asdict(self)


@record
class SmokeRun:
    """What one smoke training did, with everything measured (JSON round trip via serde).

    ``status``: ok, hang, crash, error, nan (a non-finite loss or weight), diverged (the loss
    blew up while staying finite), oom (the kernel's OOM killer ended it: not the layer's fault),
    skipped (the diagnosed TensorFlow cannot train this variant or scenario: ``skip_reason`` says why).
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
    # The replicas' copies of the non-trainable variables (BatchNormalization's moving statistics):
    # plain BatchNormalization lets them drift apart, by design.
    replica_state_max_abs_diff: float | None = None
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
    traceback: str = ""  # the traceback of the error where the child raised it
    signal: str = ""
    retried_after: str = ""  # "" unless a first attempt died by a signal: how it died
    stacks: str = ""  # every thread's Python stack when a hang was declared
    stderr_tail: str = ""
    duration_s: float = 0.0
    checkpoint: list[CheckpointStep] = field(default_factory=list)  # checkpoint and resume scenarios
    model_size: int = 1  # width multiplier (`--model-sizes`); 1: the smoke's own tiny model
    parameters: int | None = None  # the model's parameter count, as the child built it
    # Input-bound probe (smoke/input_bound.py): the input pipeline alone, and the N-device step
    # fed from a batch already in memory, in samples per second (the mean of its rounds), and each
    # round (a report written before the rounds has the rates alone).
    input_samples_per_s: float | None = None
    compute_samples_per_s: float | None = None
    input_rounds: list[InputRound] = field(default_factory=list)
    # The leak probe (scenario leak_probe): the memory after each fit, predict and evaluate call.
    leak_cycles: list[LeakCycle] = field(default_factory=list)
    skip_reason: str = ""  # status skipped: what the diagnosed TensorFlow lacks for this run
    # The user's model on 1 device (`SmokeSpec.split_replicas`): the losses of the same training
    # with each batch split as that many replicas split it, the layers that differ per replica by
    # design, or why the split training was not measured.
    split_replicas: int = 0
    split_losses: list[float | None] = field(default_factory=list)
    split_layers: list[str] = field(default_factory=list)
    split_skipped: str = ""
    # On the N-device run, from its 1-device twin's split training: how far the loss of a healthy
    # N-device training is expected to be from 1 device (relative, as ``loss_vs_single``).
    expected_loss_difference: float | None = None
    nonfinite_origin: NonfiniteOrigin | None = None  # status nan: where the first NaN/Inf came from

    @property
    def input_headroom(self) -> float | None:
        """How many times over the pipeline alone could feed the devices (below 1: they wait)."""
        supply, demand = self.input_samples_per_s, self.compute_samples_per_s
        return supply / demand if supply is not None and demand else None

    @property
    def layer_variant(self) -> str:
        """"lstm-cudnn", "dense": the layer and its variant as one word."""
        return variant_name(self.layer, self.variant)

    @property
    def name(self) -> str:
        """Stable identifier, also the check / JUnit testcase name."""
        batch = f"/b{self.global_batch}" if self.global_batch else ""
        size = f"/w{self.model_size}" if self.model_size != 1 else ""
        return f"smoke/{self.layer_variant}/{self.devices}x{self.device_kind}/{self.scenario}{batch}{size}"

    @property
    def simulated(self) -> bool:
        return self.device_kind == "cpu-virtual"

    @property
    def usage(self) -> tuple[str, ...]:
        """The ways of training (the matrix's ``usage``) this run exercised beyond model.fit."""
        way = USAGE_SCENARIOS.get(self.scenario)
        return way.usage if way is not None else SCENARIO_USAGE.get(self.scenario, ())


def runs_from_report(data: dict[str, object] | None, source: str) -> list[SmokeRun]:
    """The smoke runs recorded in a saved report (`check --format json`, `mgpu-doctor report`).

    Raises ValueError with the field at fault when they do not fit the schema.
    """
    from mgpu_doctor.model.serde import SchemaError, from_jsonable

    if not data or not data.get("smoke_runs"):
        return []
    try:
        return from_jsonable(list[SmokeRun], data["smoke_runs"], "report.smoke_runs")
    except SchemaError as exc:
        raise ValueError(f"{source}: field {exc.path}: {exc.message}") from None


@record
class MapPoint:
    """One cell of the map: an N-device run with the even split, against its 1-device twin."""

    layer: str  # "lstm"
    label: str  # the layer and its variant, "lstm-cudnn"
    devices: int
    global_batch: int
    model_size: int
    parameters: int | None
    speedup: float | None  # None: the run or its 1-device twin failed
    efficiency: float | None  # speedup / devices
    simulated: bool


def map_points(runs: Iterable[SmokeRun]) -> list[MapPoint]:
    """The cells of the map: every N-device run with the even split (the speedup is None where
    it or its 1-device twin failed, which leaves a gap)."""
    return [MapPoint(r.layer, r.layer_variant, r.devices, r.global_batch, r.model_size, r.parameters,
                     r.speedup, r.scaling_efficiency, r.simulated)
            for r in runs if r.devices > 1 and r.scenario == "even"]
