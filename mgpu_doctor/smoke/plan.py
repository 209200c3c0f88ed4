"""Which smoke trainings run: layers x variants x device counts x scenarios x batch sizes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mgpu_doctor.inputs import shorten
from mgpu_doctor.smoke.model import LAYERS, SCENARIOS, VARIANTS, SmokeSpec

DEFAULT_GLOBAL_BATCH = 64
DEFAULT_STEPS = 4  # full batches per epoch; the uneven scenario adds one sample
DEFAULT_EPOCHS = 4  # the first one traces; memory slopes need the others
DEFAULT_VIRTUAL_DEVICES = 2
# Bounds on what a smoke option may ask for: beyond them the request is a typo, not a plan.
MAX_DEVICES = 1024
MAX_BATCH_SIZE = 1 << 20


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
