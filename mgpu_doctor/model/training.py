"""The training profile: how the user trains, in the words of `matrix query`, with where each fact
came from.

Declared facts come from ``[tool.mgpu-doctor.training]`` of ``pyproject.toml``, the ``[training]``
table of ``.mgpu-doctor.toml`` or the options (``--strategy``, ``--layers``, ...); observed facts
from the user's own model, read in a child. The known-issue matching reads the merged facts: a
fact neither declared nor observed is unknown, and an entry that needs it stays conditional.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mgpu_doctor.record import field, fields, record

# The fields of TrainingFacts, in the order reports show them.
KEYS = ("strategy", "layers", "usage", "gpus", "workers", "backend", "scenario")
LIST_KEYS = ("layers", "usage")
# The option that declares each key (`check` and `smoke` already own --layers, --gpus and
# --workers: what the smoke trains).
OPTIONS: dict[str, str] = {
    "strategy": "--strategy", "layers": "--model-layers", "usage": "--usage", "gpus": "--train-gpus",
    "workers": "--train-workers", "backend": "--backend", "scenario": "--scenario",
}


@record
class TrainingFacts:
    """How the user trains: the `matrix query` vocabulary. None / () = unknown."""

    strategy: str | None = None
    layers: tuple[str, ...] = ()
    usage: tuple[str, ...] = ()
    gpus: int | None = None
    workers: int | None = None
    backend: str | None = None
    scenario: str | None = None

    def known(self) -> tuple[str, ...]:
        """The keys that carry a value, in :data:`KEYS` order."""
        return tuple(k for k in KEYS if getattr(self, k) not in (None, ()))

    def to_dict(self) -> dict[str, Any]:
        """Only the known keys; lists as lists (the JSON form)."""
        out: dict[str, Any] = {}
        for key in self.known():
            value = getattr(self, key)
            out[key] = list(value) if key in LIST_KEYS else value
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> TrainingFacts:
        """The inverse of :meth:`to_dict` (values already checked: a report's own JSON)."""
        kwargs: dict[str, Any] = {}
        for key in KEYS:
            if key in data and data[key] is not None:
                kwargs[key] = tuple(data[key]) if key in LIST_KEYS else data[key]
        return TrainingFacts(**kwargs)


def shown(key: str, value: Any) -> str:
    """``layers`` ``("gru", "dropout")`` -> ``gru, dropout``."""
    return ", ".join(value) if key in LIST_KEYS else str(value)


@record
class TrainingProfile:
    """Declared and observed training facts with where each came from; what neither says is unknown.

    ``declared_from`` / ``observed_from`` map a key to its source: ``pyproject.toml:
    [tool.mgpu-doctor.training] usage``, ``--usage``, ``model: mypkg.models:build``.
    A declared ``layers`` list is the whole list, as in `matrix query`: an entry that needs a layer
    not on it does not apply. A declared ``usage`` list is partial (what is used; issue 36): a usage
    word it does not name stays unknown, "applies if you ...". Observed layers are the model's whole
    list too; observed usage is partial: ``usage_checked`` names the usage words the observation
    decides (present or absent), the others stay unknown unless declared.
    """

    declared: TrainingFacts = field(default_factory=TrainingFacts)
    declared_from: dict[str, str] = field(default_factory=dict)
    observed: TrainingFacts = field(default_factory=TrainingFacts)
    observed_from: dict[str, str] = field(default_factory=dict)
    usage_checked: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.declared.known() and not self.observed.known()

    def facts(self) -> TrainingFacts:
        """Declared and observed merged: lists are united, a declared single value wins."""
        merged: dict[str, Any] = {}
        for f in fields(TrainingFacts):
            mine, seen = getattr(self.declared, f.name), getattr(self.observed, f.name)
            if f.name in LIST_KEYS:
                merged[f.name] = tuple(dict.fromkeys(mine + seen))
            else:
                merged[f.name] = mine if mine is not None else seen
        return TrainingFacts(**merged)

    def unknown(self) -> tuple[str, ...]:
        """The keys neither declared nor observed."""
        known = set(self.declared.known()) | set(self.observed.known())
        return tuple(k for k in KEYS if k not in known)

    def usage_undecided(self, all_words: tuple[str, ...]) -> tuple[str, ...] | None:
        """The usage words still unknown: None when nothing is known about usage at all, else the
        words neither named nor decided. A typed list (declared) is partial: it says what is used,
        not that nothing else is; only what reads the whole code (``usage_checked``) rules words out."""
        if not self.declared.usage and not self.observed.usage and not self.usage_checked:
            return None
        decided = set(self.declared.usage) | set(self.observed.usage) | set(self.usage_checked)
        return tuple(w for w in all_words if w not in decided)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in the report (``check --from`` replays it)."""
        return {
            "declared": self.declared.to_dict(),
            "declared_from": _sources(self.declared, self.declared_from),
            "observed": self.observed.to_dict(),
            "observed_from": _sources(self.observed, self.observed_from),
            "usage_checked": list(self.usage_checked),
            "unknown": list(self.unknown()),
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> TrainingProfile:
        return TrainingProfile(
            declared=TrainingFacts.from_dict(data.get("declared") or {}),
            declared_from=dict(data.get("declared_from") or {}),
            observed=TrainingFacts.from_dict(data.get("observed") or {}),
            observed_from=dict(data.get("observed_from") or {}),
            usage_checked=tuple(data.get("usage_checked") or ()),
        )


def _sources(facts: TrainingFacts, sources: Mapping[str, str]) -> dict[str, str]:
    return {k: sources[k] for k in facts.known() if k in sources}
