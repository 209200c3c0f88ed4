"""The usage scenarios of the smoke suite: ways of training beyond plain `model.fit` that half of the
matrix's entries condition on, each trained 1 vs N like the stock scenarios (the child side is
``child_scripts/_smoke_scenarios.py``).

They run at ``--level long``, and at ``standard`` for the usage words the training profile (or the
user's model) declares. A failed run is looked up under its usage words; a passing one marks the
entries that need them "not reproduced here".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UsageScenario:
    """One way of training: its scenario name, the matrix's usage words it exercises, its title."""

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


def usage_scenario_names() -> tuple[str, ...]:
    return tuple(USAGE_SCENARIOS)


def scenarios_for_usage(usage: tuple[str, ...]) -> tuple[str, ...]:
    """The usage scenarios a declared or observed usage asks for (``custom_training_loop`` -> the
    custom loop; ``distribute_dataset`` -> the distributed dataset, which the loop also uses)."""
    return tuple(s.name for s in USAGE_SCENARIOS.values() if s.usage[0] in usage)
