"""Chart data from smoke runs: the scaling map, loss per epoch and memory per epoch.

Pure functions from ``SmokeRun``s to ``Chart``s; `mermaid` and `svg` draw them. A chart knows
nothing about how it is drawn, so both pictures of one report always show the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mgpu_doctor.model.smoke_runs import MapPoint, SmokeRun, map_points
from mgpu_doctor.record import record

# Colours of the series, in order (Tableau 10): named, so a Markdown legend can say which is which
# where the renderer draws none (Mermaid's xychart has no legend before Mermaid 12).
PALETTE: tuple[tuple[str, str], ...] = (
    ("blue", "#1f77b4"), ("orange", "#ff7f0e"), ("green", "#2ca02c"), ("red", "#d62728"),
    ("purple", "#9467bd"), ("brown", "#8c564b"), ("pink", "#e377c2"), ("grey", "#7f7f7f"),
    ("olive", "#bcbd22"), ("cyan", "#17becf"),
)
SIMULATED_TITLE = "simulated on logical CPU devices"
SIMULATED_NOTE = ("Simulated: the devices were logical CPU devices, so these speeds say nothing about "
                  "GPUs or NCCL.")


@record
class Series:
    """One line (or bar series) of a chart: a value per category, ``None`` where there is none."""

    name: str
    values: tuple[float | None, ...]
    kind: str = "line"  # "line" or "bar"
    reference: bool = False  # a fixed level to compare with (1x, 100 %), not a measurement
    nonfinite: tuple[int, ...] = ()  # categories where the value was NaN or Inf (drawn as a mark)


@record
class Chart:
    """One picture: categories along x, one or more series of values along y."""

    key: str  # stable and unique within a report: "scaling-speedup", "loss-dense-b64"
    title: str
    x_label: str
    categories: tuple[str, ...]
    y_label: str
    series: tuple[Series, ...]
    y_min: float | None = None  # None: from the data
    note: str = ""
    group: str = ""  # a key of GROUPS


# How the pictures are grouped in a report, in order: (group, heading).
GROUPS = (("scaling", "Scaling map: N vs 1 devices"), ("input", "Input pipeline vs the devices"),
          ("loss", "Loss per epoch, 1 vs N devices"), ("memory", "Memory per epoch"))


def colour(index: int) -> tuple[str, str]:
    """(name, hex) of the ``index``-th series; the palette repeats after ten."""
    return PALETTE[index % len(PALETTE)]


def scaling_charts(runs: Iterable[SmokeRun]) -> list[Chart]:
    """Speedup and scaling efficiency of N vs 1 devices: per model size, over the global batch.

    With one global batch the x axis is the layer instead (a line needs two points).
    """
    cells = map_points(runs)
    if all(c.speedup is None for c in cells):
        return []
    charts: list[Chart] = []
    sizes = sorted({c.model_size for c in cells})
    for size in sizes:
        group = [c for c in cells if c.model_size == size]
        simulated = any(c.simulated for c in group)
        label = f"x{size}" if len(sizes) > 1 else ""
        for measure in ("speedup", "efficiency"):
            charts.append(_scaling_chart(group, measure, label, simulated, _parameters_note(group)))
    return charts


def _parameters_note(cells: list[MapPoint]) -> str:
    """"Model size x4: dense 2,305 parameters, conv2d 881." where the runs counted them."""
    counts = dict.fromkeys(f"{c.label} {c.parameters:,}" for c in cells if c.parameters is not None)
    if not counts:
        return ""
    return f"Model size x{cells[0].model_size}: {', '.join(counts)} parameters."


def _scaling_chart(cells: list[MapPoint], measure: str, size: str, simulated: bool,
                   size_note: str = "") -> Chart:
    def value(c: MapPoint) -> float | None:
        if measure == "speedup":
            return c.speedup
        return None if c.efficiency is None else round(c.efficiency * 100, 6)

    counts = sorted({c.devices for c in cells})
    vs = f"{'/'.join(str(n) for n in counts)} vs 1 devices"
    title = ("Speedup" if measure == "speedup" else "Scaling efficiency") + f" of {vs}"
    title += f", model size {size}" if size else ""
    title += f" ({SIMULATED_TITLE})" if simulated else ""
    y_label = "speedup (x)" if measure == "speedup" else "efficiency (percent of ideal)"
    ref_name = "1x: no faster than 1 device" if measure == "speedup" else "100: ideal"
    ref_value = 1.0 if measure == "speedup" else 100.0
    key = f"scaling-{measure}" + (f"-x{cells[0].model_size}" if size else "")
    batches = sorted({c.global_batch for c in cells})
    note = " ".join(filter(None, [size_note if size else "", SIMULATED_NOTE if simulated else ""]))
    if len(batches) >= 2:
        series_keys = sorted({(c.label, c.devices) for c in cells}, key=lambda k: (k[1], k[0]))
        by_point = {(c.label, c.devices, c.global_batch): value(c) for c in cells}
        series = [Series(_series_name(layer, n, len(counts) > 1),
                         tuple(by_point.get((layer, n, b)) for b in batches))
                  for layer, n in series_keys]
        series.append(Series(ref_name, tuple(ref_value for _ in batches), reference=True))
        return Chart(key, title, "global batch", tuple(str(b) for b in batches), y_label,
                     tuple(series), y_min=0.0, note=note, group="scaling")
    # A bar per layer that has a value; a gap among bars would read as a missing layer.
    points = sorted((c for c in cells if value(c) is not None), key=lambda c: (c.devices, c.label))
    failed = sorted({_series_name(c.label, c.devices, len(counts) > 1) for c in cells if value(c) is None})
    if failed:
        note = " ".join(filter(None, [note, f"No speedup for {', '.join(failed)}: the run or its "
                                             "1-device twin failed."]))
    categories = tuple(_series_name(c.label, c.devices, len(counts) > 1) for c in points)
    bars = Series(f"{'speedup' if measure == 'speedup' else 'efficiency'} at global batch {batches[0]}",
                  tuple(value(c) for c in points), "bar")
    reference = Series(ref_name, tuple(ref_value for _ in points), reference=True)
    return Chart(key, title, "layer", categories, y_label, (bars, reference), y_min=0.0, note=note,
                 group="scaling")


def _series_name(layer: str, devices: int, several_counts: bool) -> str:
    return f"{layer} {devices}x" if several_counts else layer


def loss_charts(runs: Iterable[SmokeRun]) -> list[Chart]:
    """Per layer and global batch: the loss after each epoch, one line per device count and scenario."""
    return [chart for _, chart in _per_epoch_charts(
        [r for r in runs if r.losses], "loss", _losses, "Loss per epoch", "loss", "loss")]


def memory_charts(runs: Iterable[SmokeRun]) -> list[Chart]:
    """Per layer and global batch: host RSS after each epoch, and GPU memory where measured."""
    runs = list(runs)
    charts = _per_epoch_charts([r for r in runs if r.rss_mb], "host-memory", _rss,
                               "Host memory (RSS) per epoch", "MB", "memory")
    charts += _per_epoch_charts([r for r in runs if r.gpu_memory_mb], "gpu-memory", _gpu_memory,
                                "GPU memory per epoch", "MB", "memory")
    return [chart for _, chart in sorted(charts, key=lambda pair: pair[0])]


def _losses(run: SmokeRun) -> list[float | None]:
    return list(run.losses)


def _rss(run: SmokeRun) -> list[float | None]:
    return list(run.rss_mb)


def _gpu_memory(run: SmokeRun) -> list[float | None]:
    return list(run.gpu_memory_mb)


def _per_epoch_charts(runs: list[SmokeRun], what: str, values_of: Callable[[SmokeRun], list[float | None]],
                      title: str, y_label: str, group: str) -> list[tuple[tuple[str, int, int], Chart]]:
    """One chart per layer, global batch and model size: a line per device count and scenario."""
    groups: dict[tuple[str, int, int], list[SmokeRun]] = {}
    for run in runs:
        groups.setdefault((run.layer_variant, run.global_batch, run.model_size), []).append(run)
    charts = []
    for (layer, batch, size), members in sorted(groups.items()):
        members.sort(key=lambda r: (r.scenario != "even", r.scenario, r.devices))
        epochs = max(len(values_of(r)) for r in members)
        series = tuple(Series(_run_name(r), tuple(_pad(values_of(r), epochs)),
                              nonfinite=_nonfinite(r, values_of)) for r in members)
        marked = [f"{s.name} at epoch {', '.join(str(i + 1) for i in s.nonfinite)}"
                  for s in series if s.nonfinite]
        note = f"NaN or Inf (marked NaN at the top): {'; '.join(marked)}." if marked else ""
        sized = f"-w{size}" if size != 1 else ""
        charts.append(((layer, batch, size), Chart(
            f"{what}-{layer}-b{batch}{sized}",
            f"{title}: {layer}, global batch {batch}" + (f", model size x{size}" if size != 1 else ""),
            "epoch", tuple(str(i + 1) for i in range(epochs)), y_label, series, note=note, group=group)))
    return charts


def _nonfinite(run: SmokeRun, values_of: Callable[[SmokeRun], list[float | None]]) -> tuple[int, ...]:
    """The epochs whose value the run recorded as not finite: a loss from its first NaN or Inf on
    (the child writes those as missing values)."""
    if values_of is not _losses or run.nonfinite_epoch is None:
        return ()
    values = values_of(run)
    return tuple(i for i in range(run.nonfinite_epoch - 1, len(values)) if values[i] is None)


def _run_name(run: SmokeRun) -> str:
    devices = "1 device" if run.devices == 1 else f"{run.devices} devices"
    return f"{devices}, {run.scenario.replace('_', ' ')}" + ("" if run.status == "ok" else f" ({run.status})")


def _pad(values: list[float | None], length: int) -> list[float | None]:
    return list(values) + [None] * (length - len(values))


def input_charts(runs: Iterable[SmokeRun]) -> list[Chart]:
    """The input-bound probe: the share of each step the devices would wait for their input, per
    probed run (0 where the pipeline alone delivers at least what they consume from memory); the
    category says the pipeline's headroom (its samples/s over theirs)."""
    probed = [r for r in runs if r.input_headroom is not None]
    if not probed:
        return []
    probed.sort(key=lambda r: (r.devices, r.layer_variant))
    several = len({r.devices for r in probed}) > 1
    ratios = [r.input_headroom or 0.0 for r in probed]
    categories = tuple(f"{_series_name(r.layer_variant, r.devices, several)}: pipeline {ratio:.2g}x"
                       for r, ratio in zip(probed, ratios, strict=True))
    waiting = tuple(round(max(0.0, 1.0 - ratio) * 100, 1) for ratio in ratios)
    simulated = any(r.simulated for r in probed)
    devices = "/".join(str(n) for n in sorted({r.devices for r in probed}))
    note = ("Pipeline Nx: the samples/s it delivers alone over those the devices consume from memory. "
            "Below 1x the devices wait (smoke.LAYER.input-bound). "
            + ("Measured against simulated CPU devices: GPUs consume faster, so they would wait "
               "longer." if simulated else ""))
    return [Chart("input-waiting", f"Devices waiting for input, {devices} devices"
                  + (f" ({SIMULATED_TITLE})" if simulated else ""),
                  "layer", categories, "waiting (percent of each step)",
                  (Series("devices waiting for the pipeline", waiting, "bar"),),
                  y_min=0.0, note=note.strip(), group="input")]


def all_charts(runs: Iterable[SmokeRun]) -> list[Chart]:
    """Every picture of a report, in the order it shows them."""
    runs = list(runs)
    return scaling_charts(runs) + input_charts(runs) + loss_charts(runs) + memory_charts(runs)
