"""Which smoke trainings run: the level decides the shape of the plan (one table, `LEVELS` in
``levels.py``); the options pick layers, device counts and batch sizes."""

from __future__ import annotations

import itertools
import math

from mgpu_doctor.model.smoke_runs import LEAK_SCENARIO, SCENARIOS, SmokeSpec
from mgpu_doctor.process.inputs import shorten
from mgpu_doctor.record import record
from mgpu_doctor.smoke.checkpoint import CHECKPOINT_SCENARIOS
from mgpu_doctor.smoke.layers import SMOKE_LAYERS, layer_names, same_on_one_device, same_without_cudnn
from mgpu_doctor.smoke.levels import DEFAULT_LEVEL, EVERY_LAYER, LEVELS, SMOKE_LEVELS, Level
from mgpu_doctor.smoke.usage import scenarios_for_usage, usage_scenario_names

# The layer name of the user's own model (`smoke --model`): its runs are smoke/model/...
USER_MODEL = "model"
DEFAULT_VIRTUAL_DEVICES = 2
# Bounds on what a smoke option may ask for: beyond them the request is a typo, not a plan.
MAX_DEVICES = 1024
MAX_BATCH_SIZE = 1 << 20
MAX_MODEL_SIZE = 256  # width x256: a dense layer of 8192 units, an LSTM of 2048
# The leak probe (smoke/leak.py): calls of fit, then predict, then evaluate on 1 and N devices, of
# this stock model (else the first planned layer). 12 calls leave 10 after the warm-up.
LEAK_CYCLES = 12
LEAK_LAYER = "dense"


class PlanError(ValueError):
    """Options that cannot make a plan (unknown layer, too many GPUs...)."""


@record
class SmokeOptions:
    layers: tuple[str, ...] = ()  # (): every layer of the table
    gpus: tuple[int, ...] | None = None  # None: 1 and every visible GPU
    virtual_devices: int = DEFAULT_VIRTUAL_DEVICES
    batch_sizes: tuple[int, ...] | None = None  # None: the level's
    model_sizes: tuple[int, ...] | None = None  # None: the level's, for its map layers
    level: str = DEFAULT_LEVEL
    # the scenarios the level may plan (tests narrow it)
    scenarios: tuple[str, ...] = SCENARIOS + CHECKPOINT_SCENARIOS + (LEAK_SCENARIO,) + usage_scenario_names()
    leak_probe: bool | None = None  # None: the level's (`--leak-probe`, `--no-leak-probe`)
    backend: str = "tensorflow"  # Keras 3's backend: tensorflow, or jax (smoke/jax_section.py)
    # the usage words the training profile or the model declares: their usage scenarios run at
    # levels that do not run every one
    usage: tuple[str, ...] = ()
    # `smoke --model`: the user's model (MODULE:FUNCTION), its data and import path; the stock
    # layers train too only where --layers names them (``stock_layers``)
    user_model: str = ""
    user_data: str = ""
    model_path: str = ""
    stock_layers: bool = True

    @property
    def plan_level(self) -> Level:
        level = LEVELS.get(self.level)
        if level is None or not level.trains:
            raise PlanError(f"no smoke trainings at level {shorten(self.level)}; "
                            f"levels that train: {', '.join(SMOKE_LEVELS)}")
        return level

    @property
    def planned_layers(self) -> tuple[str, ...]:
        if not self.stock_layers:
            return ()
        return self.layers or layer_names()

    @property
    def requested_batches(self) -> tuple[int, ...]:
        return self.batch_sizes or self.plan_level.batch_sizes

    def model_sizes_for(self, layer: str) -> tuple[int, ...]:
        """The model sizes ``layer`` trains at; every scenario runs at the first."""
        if self.model_sizes:
            return self.model_sizes
        level = self.plan_level
        mapped = layer in level.map_layers or level.map_layers == EVERY_LAYER
        return level.model_sizes if mapped else level.model_sizes[:1]

    @property
    def leak_probe_layer(self) -> str:
        """The layer the leak probe cycles, or "" where it does not run."""
        wanted = self.plan_level.leak_probe if self.leak_probe is None else self.leak_probe
        if not wanted or LEAK_SCENARIO not in self.scenarios:
            return ""
        return LEAK_LAYER if LEAK_LAYER in self.planned_layers else self.planned_layers[0]

    @property
    def input_probe_layer_names(self) -> tuple[str, ...]:
        wanted = self.plan_level.input_probe_layers
        if wanted == EVERY_LAYER:
            return self.planned_layers
        chosen = tuple(layer for layer in self.planned_layers if layer in wanted)
        return chosen or self.planned_layers[:1]


def parse_layers(value: str | None) -> tuple[str, ...]:
    known = layer_names()
    if value is None:
        return known
    names = tuple(dict.fromkeys(n.strip().lower() for n in value.split(",") if n.strip()))
    if not names:
        raise PlanError(f"--layers names no layer; known: {', '.join(known)}")
    unknown = [n for n in names if n not in known]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise PlanError(f"unknown layer {', '.join(shorten(n) for n in unknown[:5])}{more}; "
                        f"known: {', '.join(known)}")
    return names


def parse_counts(value: str | None, what: str, most: int = MAX_DEVICES) -> tuple[int, ...] | None:
    if value is None:
        return None
    shown = shorten(value)
    words = [n.strip() for n in value.split(",") if n.strip()]
    if not all(w.isdecimal() for w in words):
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


@record
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
    probed = options.input_probe_layer_names
    for layer in options.planned_layers:
        sizes = options.model_sizes_for(layer)
        for variant in SMOKE_LAYERS[layer].variants:
            if not level.same_twice and kind != "gpu" and same_without_cudnn(layer, variant):
                continue
            for batch, size in itertools.product(batches, sizes):
                main = batch == batches[0] and size == sizes[0]  # the others compare speed only
                for scenario in (s for s in options.scenarios if s in SCENARIOS):
                    if not _scenario_planned(level, layer, scenario, sweep=not main):
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
                            model_size=size,
                            input_probe=main and devices > 1 and scenario == "even" and layer in probed,
                        ))
            for scenario in _usage_scenarios(options, layer):
                for devices in counts:
                    specs.append(SmokeSpec(
                        index=len(specs), layer=layer, variant=variant, devices=devices, device_kind=kind,
                        scenario=scenario, global_batch=batches[0], samples=batches[0] * level.steps,
                        epochs=level.epochs, virtual_devices=max(counts) if kind == "cpu-virtual" else 0,
                        model_size=sizes[0],
                    ))
            for scenario in _checkpoint_scenarios(level, layer, options.scenarios):
                specs.append(SmokeSpec(
                    index=len(specs), layer=layer, variant=variant, devices=max(counts), device_kind=kind,
                    scenario=scenario, global_batch=batches[0], samples=batches[0] * level.steps,
                    epochs=level.epochs, virtual_devices=max(counts) if kind == "cpu-virtual" else 0,
                    model_size=sizes[0],
                ))
    leak_layer = options.leak_probe_layer
    if leak_layer:
        for devices in counts:
            specs.append(SmokeSpec(
                index=len(specs), layer=leak_layer, variant=SMOKE_LAYERS[leak_layer].variants[0],
                devices=devices, device_kind=kind, scenario=LEAK_SCENARIO, global_batch=batches[0],
                samples=batches[0] * level.steps, epochs=1,
                virtual_devices=max(counts) if kind == "cpu-virtual" else 0,
                model_size=options.model_sizes_for(leak_layer)[0], cycles=LEAK_CYCLES,
            ))
    if options.user_model:
        specs.extend(_user_model_runs(options, level, kind, counts, batches[0], len(specs)))
    return specs


def _user_model_runs(options: SmokeOptions, level: Level, kind: str, counts: tuple[int, ...],
                     batch: int, first: int) -> list[SmokeSpec]:
    """The user's model 1 vs N with even batches, and with an uneven final batch on N devices (and
    on 1 where the level compares it); the input-bound probe on its own pipeline with --data; the
    checkpoint round trip on N devices where the level has one."""
    specs: list[SmokeSpec] = []
    for scenario in (s for s in options.scenarios if s in SCENARIOS):
        for devices in counts:
            if scenario != "even" and devices == 1 and not level.single_device_uneven:
                continue
            specs.append(SmokeSpec(
                index=first + len(specs), layer=USER_MODEL, variant="", devices=devices, device_kind=kind,
                scenario=scenario, global_batch=batch,
                samples=batch * level.steps + (1 if scenario == "uneven_final_batch" else 0),
                epochs=level.epochs, virtual_devices=max(counts) if kind == "cpu-virtual" else 0,
                input_probe=bool(options.user_data) and devices > 1 and scenario == "even",
                split_replicas=max(counts) if devices == 1 and scenario == "even" else 0,
                user_model=options.user_model, user_data=options.user_data, model_path=options.model_path,
            ))
    if "checkpoint" in options.scenarios and level.checkpoint_layers:  # the level's round trip
        specs.append(SmokeSpec(
            index=first + len(specs), layer=USER_MODEL, variant="", devices=max(counts), device_kind=kind,
            scenario="checkpoint", global_batch=batch, samples=batch * level.steps, epochs=level.epochs,
            virtual_devices=max(counts) if kind == "cpu-virtual" else 0,
            user_model=options.user_model, user_data=options.user_data, model_path=options.model_path,
        ))
    return specs


def _usage_scenarios(options: SmokeOptions, layer: str) -> list[str]:
    level = options.plan_level
    if not (layer in level.usage_layers or level.usage_layers == EVERY_LAYER):
        return []
    asked = usage_scenario_names() if level.usage_everywhere else scenarios_for_usage(options.usage)
    return [s for s in asked if s in options.scenarios]


def _checkpoint_scenarios(level: Level, layer: str, wanted: tuple[str, ...]) -> list[str]:
    layers = {"checkpoint": level.checkpoint_layers, "resume": level.resume_layers}
    return [s for s in CHECKPOINT_SCENARIOS
            if s in wanted and (layer in layers[s] or layers[s] == EVERY_LAYER)]


def _scenario_planned(level: Level, layer: str, scenario: str, sweep: bool) -> bool:
    if scenario == "even":
        return True
    # The sweep compares speed at even splits; an empty replica is the same hazard at any batch.
    return not sweep and (level.uneven_everywhere or SMOKE_LAYERS[layer].empty_replica_sensitive)


def _single_planned(level: Level, layer: str, variant: str, scenario: str) -> bool:
    if scenario != "even" and not level.single_device_uneven:
        return False  # N devices with an uneven batch are judged against their even run
    return level.same_twice or not same_on_one_device(layer, variant)
