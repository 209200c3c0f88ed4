"""The smoke layers: one row each, read by the plan, the rules, the gates, the matrix lookup, the
option help, the report schema and the README. The child's models
(`child_scripts/_smoke_models.py`, which cannot import this package) are checked against it by a
test. Adding a layer = one row here and its model there.
"""

from __future__ import annotations

from mgpu_doctor.record import record

# What a model eats, as the child builds it (`_smoke_models.DATA`).
DATA_KINDS = ("vector", "image", "sequence", "tokens")


@record
class SmokeLayer:
    """One layer type the smoke engine trains, and the traits that decide how it is planned and judged."""

    name: str
    data: str  # one of DATA_KINDS
    # Statistics over the batch (BatchNormalization): replicas disagree with one device unless
    # synchronized, and an empty replica gets NaN statistics. Adds the "plain"/"sync" variants.
    batch_statistics: bool = False
    # Recurrent: the state is built from the batch size, so an empty replica can break it.
    recurrent: bool = False
    # A cuDNN kernel Keras takes when eligible: adds the "cudnn"/"generic" variants; without a GPU
    # the cuDNN-eligible variant trains exactly what the generic one trains.
    cudnn: bool = False
    # The words a known-issue entry uses for it (`matrix/vocabulary.py` LAYERS); the
    # synchronized variant of a batch-statistics layer is looked up under `sync_term`.
    term: str = ""
    sync_term: str = ""

    @property
    def variants(self) -> tuple[str, ...]:
        if self.cudnn:
            return ("cudnn", "generic")
        if self.batch_statistics:
            return ("plain", "sync")
        return ("",)

    @property
    def empty_replica_sensitive(self) -> bool:
        """Whether a replica without samples in the last batch can change its training (the
        uneven-final-batch scenario runs for it at the standard level)."""
        return self.batch_statistics or self.recurrent

    def matrix_terms(self, variant: str) -> tuple[str, ...]:
        if variant == "sync" and self.sync_term:
            return (self.sync_term,)
        return (self.term or self.name,)


SMOKE_LAYERS: dict[str, SmokeLayer] = {layer.name: layer for layer in (
    SmokeLayer("dense", data="vector"),
    SmokeLayer("conv2d", data="image"),
    SmokeLayer("lstm", data="sequence", recurrent=True, cudnn=True),
    SmokeLayer("gru", data="sequence", recurrent=True, cudnn=True),
    SmokeLayer("batchnorm", data="vector", batch_statistics=True, sync_term="sync_batchnorm"),
    SmokeLayer("embedding", data="tokens"),
    SmokeLayer("attention", data="sequence"),
)}


def layer_names() -> tuple[str, ...]:
    """Every smoke layer, in table order (read at call time: the table is the only list)."""
    return tuple(SMOKE_LAYERS)


def variants(layer: str) -> tuple[str, ...]:
    return SMOKE_LAYERS[layer].variants


def same_without_cudnn(layer: str, variant: str) -> str:
    """The variant that trains the same as ``variant`` where there is no cuDNN, or ""."""
    row = SMOKE_LAYERS.get(layer)
    return "generic" if row is not None and row.cudnn and variant == "cudnn" else ""


def same_on_one_device(layer: str, variant: str) -> str:
    """The variant that trains the same as ``variant`` on one device (synchronized statistics
    over one replica are the plain statistics), or ""."""
    row = SMOKE_LAYERS.get(layer)
    return "plain" if row is not None and row.batch_statistics and variant == "sync" else ""


def matrix_terms(layer: str, variant: str) -> tuple[str, ...]:
    """What a smoke run of (layer, variant) exercised, in the matrix's layer words."""
    row = SMOKE_LAYERS.get(layer)
    return row.matrix_terms(variant) if row is not None else (layer,)


def markdown_table() -> str:
    """README's table of the smoke layers (a generated block: tests/test_readme.py)."""
    def yes(flag: bool) -> str:
        return "yes" if flag else ""
    rows = ["| layer | variants | data | batch statistics | recurrent | cuDNN kernel "
            "| uneven final batch at `standard` | matrix word |", "|---|---|---|---|---|---|---|---|"]
    for row in SMOKE_LAYERS.values():
        variants = ", ".join(f"`{v}`" for v in row.variants if v) or "one"
        words = dict.fromkeys(t for v in row.variants for t in row.matrix_terms(v))
        terms = ", ".join(f"`{t}`" for t in words)
        rows.append(f"| `{row.name}` | {variants} | {row.data} | {yes(row.batch_statistics)} | "
                    f"{yes(row.recurrent)} | {yes(row.cudnn)} | {yes(row.empty_replica_sensitive)} "
                    f"| {terms} |")
    return "\n".join(rows) + "\n"
