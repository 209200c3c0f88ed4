"""The training profile applied to the one resolved environment: what the known-issue matching reads.

A key the profile knows replaces what the machine (or the query) says of it: the GPUs and
workers the training uses, its Keras backend, its strategy, layers, usage and scenario. A machine
without GPUs that describes a training (a strategy, layers, usage or a scenario) does not say how
many GPUs that training uses: the count is the training's, unknown until ``--train-gpus`` says it,
so an entry that needs GPUs applies "when training on" them instead of being dropped.
"""

from __future__ import annotations

from mgpu_doctor.environment.resolve import ResolvedEnvironment, UsageFacts
from mgpu_doctor.matrix.vocabulary import USAGES
from mgpu_doctor.model.training import OPTIONS, TrainingProfile
from mgpu_doctor.record import replace

# The facts that describe a training rather than a machine.
TRAINING_KEYS = ("strategy", "layers", "usage", "scenario")


def sources(profile: TrainingProfile) -> dict[str, str]:
    """Key -> "declared in ..." / "observed: ..." for every key the profile knows."""
    out = {k: f"declared with {v}" if v.startswith("--") else f"declared in {v}"
           for k, v in profile.declared_from.items() if k in profile.declared.known()}
    for key in profile.observed.known():
        seen = f"observed: {profile.observed_from.get(key, 'the model')}"
        out[key] = f"{out[key]}; {seen}" if key in out else seen
    return out


def with_training(env: ResolvedEnvironment, profile: TrainingProfile | None) -> ResolvedEnvironment:
    """``env`` as the training the profile describes (unchanged by an empty profile)."""
    if profile is None or profile.empty:
        return env
    facts = profile.facts()
    came = sources(profile)
    u = env.usage
    undecided = profile.usage_undecided(tuple(USAGES))
    usage = UsageFacts(
        layers=facts.layers or u.layers,
        usage=facts.usage if undecided is not None else u.usage,
        strategy=facts.strategy or u.strategy,
        scenario=facts.scenario or u.scenario,
        usage_undecided=undecided or (),
        sources={**u.sources, **came},
    )
    machine = env.machine
    changes = {k: getattr(facts, k) for k in ("gpus", "workers", "backend") if getattr(facts, k) is not None}
    if changes:
        machine = replace(machine, **changes, missing={k: v for k, v in machine.missing.items()
                                                        if k not in changes})
    if facts.gpus is None and env.snapshot is not None and machine.gpus == 0 \
            and any(getattr(facts, k) for k in TRAINING_KEYS):
        why = f"this machine has no GPU; {OPTIONS['gpus']} N says how many you train on"
        machine = replace(machine, gpus=None, gpus_of_training=True, missing={**machine.missing, "gpus": why})
    return replace(env, usage=usage, machine=machine)
