"""The usage scenarios of the smoke suite: ways of training beyond plain `model.fit` that half of the
matrix's entries condition on, each trained 1 vs N like the stock scenarios (the child side is
``child_scripts/_smoke_scenarios.py``).

They run at ``--level long``, and at ``standard`` for the usage words the training profile (or the
user's model) declares. A failed run is looked up under its usage words; a passing one marks the
entries that need them "not reproduced here".
"""

from __future__ import annotations

from mgpu_doctor.model.smoke_runs import USAGE_SCENARIOS, UsageScenario

__all__ = ["USAGE_SCENARIOS", "UsageScenario", "scenarios_for_usage", "usage_scenario_names"]


def usage_scenario_names() -> tuple[str, ...]:
    return tuple(USAGE_SCENARIOS)


def scenarios_for_usage(usage: tuple[str, ...]) -> tuple[str, ...]:
    """The usage scenarios a declared or observed usage asks for (``custom_training_loop`` -> the
    custom loop; ``distribute_dataset`` -> the distributed dataset, which the loop also uses)."""
    return tuple(s.name for s in USAGE_SCENARIOS.values() if s.usage[0] in usage)
