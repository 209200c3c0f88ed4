"""Which smoke trainings run: layers x variants x device counts x scenarios x batch sizes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mgpu_doctor.smoke.model import LAYERS, SCENARIOS, VARIANTS, SmokeSpec

DEFAULT_GLOBAL_BATCH = 64
DEFAULT_STEPS = 4  # full batches per epoch; the uneven scenario adds one sample
DEFAULT_EPOCHS = 4  # the first one traces; memory slopes need the others
DEFAULT_VIRTUAL_DEVICES = 2


class PlanError(ValueError):
    """Options that cannot make a plan (unknown layer, too many GPUs...)."""


@dataclass(frozen=True)
class SmokeOptions:
    layers: tuple[str, ...] = LAYERS
    gpus: tuple[int, ...] | None = None  # None: 1 and every visible GPU
    virtual_devices: int = DEFAULT_VIRTUAL_DEVICES
    batch_sizes: tuple[int, ...] = (DEFAULT_GLOBAL_BATCH,)
    steps: int = DEFAULT_STEPS
    epochs: int = DEFAULT_EPOCHS
    scenarios: tuple[str, ...] = SCENARIOS


def parse_layers(value: str | None) -> tuple[str, ...]:
    if not value:
        return LAYERS
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    unknown = [n for n in names if n not in LAYERS]
    if unknown or not names:
        raise PlanError(f"unknown layer {', '.join(map(repr, unknown))}; known: {', '.join(LAYERS)}")
    return names


def parse_counts(value: str | None, what: str) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        counts = tuple(sorted({int(n) for n in value.split(",") if n.strip()}))
    except ValueError:
        raise PlanError(f"{what} takes comma-separated whole numbers, got {value!r}") from None
    if not counts or counts[0] < 1:
        raise PlanError(f"{what} takes numbers of at least 1, got {value!r}")
    return counts


def device_plan(options: SmokeOptions, gpu_count: int) -> tuple[str, tuple[int, ...]]:
    """The device kind and counts: real GPUs where there are 2 or more, else virtual CPUs."""
    if gpu_count >= 2:
        counts = options.gpus or (1, gpu_count)
        if max(counts) > gpu_count:
            raise PlanError(f"--gpus asks for {max(counts)} GPUs but TensorFlow sees {gpu_count}")
        return "gpu", counts
    if options.gpus is not None and max(options.gpus) > 1:
        raise PlanError(f"--gpus asks for {max(options.gpus)} GPUs but TensorFlow sees {gpu_count}; "
                        "use --virtual-devices N to simulate N devices on the CPU")
    if options.virtual_devices < 2:
        raise PlanError("--virtual-devices must be at least 2 to distribute over CPU devices")
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
    _, counts = device_plan(options, gpu_count)
    return [BatchSplit(b, even_batch(b, counts), max(counts)) for b in options.batch_sizes
            if even_batch(b, counts) != b]


def plan_runs(options: SmokeOptions, gpu_count: int) -> list[SmokeSpec]:
    """Every (layer, variant, batch, scenario, devices) to train; 1 device before N."""
    kind, counts = device_plan(options, gpu_count)
    specs: list[SmokeSpec] = []
    batches = tuple(dict.fromkeys(even_batch(b, counts) for b in options.batch_sizes))
    for layer in options.layers:
        for variant in VARIANTS.get(layer, ("",)):
            for batch in batches:
                for scenario in options.scenarios:
                    samples = batch * options.steps + (1 if scenario == "uneven_final_batch" else 0)
                    for devices in counts:
                        specs.append(SmokeSpec(
                            index=len(specs), layer=layer, variant=variant, devices=devices,
                            device_kind=kind, scenario=scenario, global_batch=batch,
                            samples=samples, epochs=options.epochs,
                            virtual_devices=max(counts) if kind == "cpu-virtual" else 0,
                        ))
    return specs
