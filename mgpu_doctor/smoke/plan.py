"""Which smoke trainings run: the level decides the shape of the plan (one table, `LEVELS`); the
options pick layers, device counts and batch sizes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mgpu_doctor.inputs import shorten
from mgpu_doctor.smoke.model import (
    EMPTY_REPLICA_LAYERS,
    LAYERS,
    SAME_ON_ONE_DEVICE,
    SAME_WITHOUT_CUDNN,
    SCENARIOS,
    VARIANTS,
    SmokeSpec,
)

DEFAULT_GLOBAL_BATCH = 64
DEFAULT_VIRTUAL_DEVICES = 2
# Bounds on what a smoke option may ask for: beyond them the request is a typo, not a plan.
MAX_DEVICES = 1024
MAX_BATCH_SIZE = 1 << 20


@dataclass(frozen=True)
class Level:
    """One ``--level``, like a hardware diagnostic's run levels: what it trains and what it skips.

    The plan, the option help and the README follow this one table; the README says what each
    level costs and what it can miss.
    """

    name: str
    trains: bool  # quick: no TensorFlow import, no smoke training
    epochs: int  # the first traces; speed needs a second; a memory slope needs 3 or more
    steps: int  # full batches per epoch; the uneven scenario adds one sample
    # Global batches: every scenario runs at the first; the others (the sweep) compare speed only.
    batch_sizes: tuple[int, ...]
    # Where the uneven-final-batch scenario runs: only layers an empty replica can break, or all.
    uneven_everywhere: bool
    # The 1-device twin of the uneven scenario: different data, so its comparison is only info.
    single_device_uneven: bool
    # A variant that trains the same as another here (cuDNN where there is none, synchronized
    # BatchNormalization on one device) also runs, although its twin's run says the same.
    same_twice: bool
    summary: str


LEVELS: dict[str, Level] = {level.name: level for level in (
    Level("quick", trains=False, epochs=0, steps=0, batch_sizes=(), uneven_everywhere=False,
          single_device_uneven=False, same_twice=False,
          summary="facts only: no TensorFlow import, no training"),
    Level("standard", trains=True, epochs=2, steps=4, batch_sizes=(DEFAULT_GLOBAL_BATCH,),
          uneven_everywhere=False, single_device_uneven=False, same_twice=False,
          summary="every layer type on 1 and N devices; the uneven final batch where an empty "
                  "replica can break the layer; 2 epochs"),
    Level("long", trains=True, epochs=8, steps=4, batch_sizes=(DEFAULT_GLOBAL_BATCH, 256, 1024),
          uneven_everywhere=True, single_device_uneven=True, same_twice=True,
          summary="every variant x scenario on 1 and N devices, a batch-size sweep, 8 epochs "
                  "(memory growth)"),
)}
DEFAULT_LEVEL = "standard"
SMOKE_LEVELS = tuple(name for name, level in LEVELS.items() if level.trains)


class PlanError(ValueError):
    """Options that cannot make a plan (unknown layer, too many GPUs...)."""


@dataclass(frozen=True)
class SmokeOptions:
    layers: tuple[str, ...] = LAYERS
    gpus: tuple[int, ...] | None = None  # None: 1 and every visible GPU
    virtual_devices: int = DEFAULT_VIRTUAL_DEVICES
    batch_sizes: tuple[int, ...] | None = None  # None: the level's
    level: str = DEFAULT_LEVEL
    scenarios: tuple[str, ...] = SCENARIOS  # the scenarios the level may plan (tests narrow it)

    @property
    def plan_level(self) -> Level:
        level = LEVELS.get(self.level)
        if level is None or not level.trains:
            raise PlanError(f"no smoke trainings at level {shorten(self.level)}; "
                            f"levels that train: {', '.join(SMOKE_LEVELS)}")
        return level

    @property
    def requested_batches(self) -> tuple[int, ...]:
        return self.batch_sizes or self.plan_level.batch_sizes


def parse_layers(value: str | None) -> tuple[str, ...]:
    if value is None:
        return LAYERS
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    if not names:
        raise PlanError(f"--layers names no layer; known: {', '.join(LAYERS)}")
    unknown = [n for n in names if n not in LAYERS]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise PlanError(f"unknown layer {', '.join(shorten(n) for n in unknown[:5])}{more}; "
                        f"known: {', '.join(LAYERS)}")
    return names


def parse_counts(value: str | None, what: str, most: int = MAX_DEVICES) -> tuple[int, ...] | None:
    if value is None:
        return None
    shown = shorten(value)
    words = [n.strip() for n in value.split(",") if n.strip()]
    if not all(w.isdigit() for w in words):
        raise PlanError(f"{what} takes comma-separated whole numbers, got {shown}")
    counts = tuple(sorted({int(w) if len(w) <= 9 else most + 1 for w in words}))
    if not counts or counts[0] < 1 or counts[-1] > most:
        raise PlanError(f"{what} takes numbers from 1 to {most}, got {shown}")
    return counts


def check_virtual_devices(count: int) -> None:
    if not 2 <= count <= MAX_DEVICES:
        raise PlanError(f"--virtual-devices must be from 2 to {MAX_DEVICES} to distribute over CPU "
                        f"devices, got {count}")


def check_device_counts(options: SmokeOptions, gpu_count: int, seen_by: str = "TensorFlow sees") -> None:
    """--gpus asks for no more GPUs than there are (before TensorFlow is asked which it sees)."""
    device_plan(options, gpu_count, seen_by)


def device_plan(options: SmokeOptions, gpu_count: int,
                seen_by: str = "TensorFlow sees") -> tuple[str, tuple[int, ...]]:
    """The device kind and counts: real GPUs where there are 2 or more, else virtual CPUs."""
    if gpu_count >= 2:
        counts = options.gpus or (1, gpu_count)
        if max(counts) > gpu_count:
            raise PlanError(f"--gpus asks for {max(counts)} GPUs but {seen_by} {gpu_count}")
        return "gpu", counts
    if options.gpus is not None and max(options.gpus) > 1:
        raise PlanError(f"--gpus asks for {max(options.gpus)} GPUs but {seen_by} {gpu_count}; "
                        "use --virtual-devices N to simulate N devices on the CPU")
    check_virtual_devices(options.virtual_devices)
    return "cpu-virtual", (1, options.virtual_devices)


@dataclass(frozen=True)
class BatchSplit:
    """A requested global batch that does not split evenly over the replicas, and what runs instead."""

    requested: int
    planned: int
    replicas: int

    @property
    def shares(self) -> str:
        """How the requested batch splits: 64 over 3 replicas is "22/21/21"."""
        base, extra = divmod(self.requested, self.replicas)
        return "/".join(str(base + (i < extra)) for i in range(self.replicas))


def even_batch(batch: int, counts: tuple[int, ...]) -> int:
    """The smallest global batch >= ``batch`` that every device count divides: "even" means even
    on every replica, and the 1-device twin trains the same global batch."""
    step = math.lcm(*counts)
    return -(-batch // step) * step


def batch_splits(options: SmokeOptions, gpu_count: int) -> list[BatchSplit]:
    """The ``--batch-sizes`` asked for that the replicas cannot share evenly (a level's own
    batches are planned even without a word: nobody asked for them)."""
    if options.batch_sizes is None:
        return []
    _, counts = device_plan(options, gpu_count)
    return [BatchSplit(b, even_batch(b, counts), max(counts)) for b in options.batch_sizes
            if even_batch(b, counts) != b]


def plan_runs(options: SmokeOptions, gpu_count: int) -> list[SmokeSpec]:
    """Every (layer, variant, batch, scenario, devices) the level trains; 1 device before N."""
    level = options.plan_level
    kind, counts = device_plan(options, gpu_count)
    specs: list[SmokeSpec] = []
    batches = tuple(dict.fromkeys(even_batch(b, counts) for b in options.requested_batches))
    for layer in options.layers:
        for variant in VARIANTS.get(layer, ("",)):
            if not level.same_twice and kind != "gpu" and (layer, variant) in SAME_WITHOUT_CUDNN:
                continue
            for batch in batches:
                for scenario in options.scenarios:
                    if not _scenario_planned(level, layer, scenario, sweep=batch != batches[0]):
                        continue
                    samples = batch * level.steps + (1 if scenario == "uneven_final_batch" else 0)
                    for devices in counts:
                        if devices == 1 and not _single_planned(level, layer, variant, scenario):
                            continue
                        specs.append(SmokeSpec(
                            index=len(specs), layer=layer, variant=variant, devices=devices,
                            device_kind=kind, scenario=scenario, global_batch=batch,
                            samples=samples, epochs=level.epochs,
                            virtual_devices=max(counts) if kind == "cpu-virtual" else 0,
                        ))
    return specs


def _scenario_planned(level: Level, layer: str, scenario: str, sweep: bool) -> bool:
    if scenario == "even":
        return True
    # The sweep compares speed at even splits; an empty replica is the same hazard at any batch.
    return not sweep and (level.uneven_everywhere or layer in EMPTY_REPLICA_LAYERS)


def _single_planned(level: Level, layer: str, variant: str, scenario: str) -> bool:
    if scenario != "even" and not level.single_device_uneven:
        return False  # N devices with an uneven batch are judged against their even run
    return level.same_twice or (layer, variant) not in SAME_ON_ONE_DEVICE
