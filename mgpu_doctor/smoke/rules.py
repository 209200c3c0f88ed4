"""Pure rules: compare N-device runs with their 1-device twins and turn runs into findings.

Every run becomes one `CheckOutcome` named after it (``smoke/dense/2xgpu/even/b64``), so the
renderers, ``--fail-on`` and the exit codes treat smoke runs like any other check.
"""

from __future__ import annotations

from mgpu_doctor.matrix.known_issues import known_issue_line
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Finding, Severity, status_for
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.checkpoint import CHECKPOINT_STATUSES, SCENARIO_TITLES, checkpoint_findings
from mgpu_doctor.smoke.guides import DISTRIBUTE_GUIDE, INPUT_GUIDE
from mgpu_doctor.smoke.input_bound import input_bound_findings, input_rates
from mgpu_doctor.smoke.layers import SMOKE_LAYERS, same_on_one_device, same_without_cudnn
from mgpu_doctor.smoke.leak import LEAK_SCENARIO, leak_findings
from mgpu_doctor.smoke.nonfinite import origin_lines, origin_short
from mgpu_doctor.smoke.plan import USER_MODEL, BatchSplit
from mgpu_doctor.smoke.scaling_map import on_a_curve, scaling_map_outcome
from mgpu_doctor.smoke.usage import USAGE_SCENARIOS

LOSS_TOLERANCE = 1e-3  # max relative loss difference 1 vs N without batch statistics
# The user's model may draw random numbers per replica (Dropout, noise layers), normalise per replica
# (BatchNormalization) or compute in float16: 1 and N devices agree only roughly. Its 1-device run
# measures how much by training again with each batch split as the replicas split it
# (child_scripts/_smoke_split.py); without that measure, a loss off by more than this is a warning.
USER_MODEL_LOSS_TOLERANCE = 5e-2
# With the measure: a difference up to EXPECTED_MARGIN times the measured one (random layers draw
# differently on every run: one draw measured, room for another), and never less than the floor
# (float16 rounding and summation order, as the mixed-precision scenario allows).
EXPECTED_MARGIN = 2.0
USER_MODEL_LOSS_FLOOR = 2e-2
LEAK_MB_PER_EPOCH = 16.0  # host RSS growth per epoch, after the first, that smells of a leak
GPU_LEAK_MB_PER_EPOCH = 16.0
POOR_SCALING = 1.0  # N devices slower than 1: the second GPU does not help at all
MAX_STACK_LINES = 40

COLLECTIVE_REUSE_ISSUE = "https://github.com/tensorflow/tensorflow/issues/62790"
# The known-issue entry with that source: the smoke finding names it, so `smoke` and
# `matrix query` tell the same story (a test holds the link).
COLLECTIVE_REUSE_ENTRY = "tf-62790-collectives-after-syncbn-model"
# The run's `framework` when tf.keras is a Keras 2 (no `use_cudnn` argument).
KERAS_2_FRAMEWORKS = ("tf_keras", "tensorflow.keras", "keras 2.")
UNEVEN_FIX = (
    "Drop the last partial batch (`dataset.batch(global_batch, drop_remainder=True)`), or make "
    "the dataset size a multiple of the global batch, or use "
    "`BatchNormalization(synchronized=True)` so the statistics are computed over all replicas."
)
# Keras 3 on JAX: DataParallel shards every batch over the devices (no synchronized BatchNormalization).
JAX_UNEVEN_FIX = (
    "Drop the last partial batch (`drop_remainder=True`, or a dataset size that is a multiple of the "
    "global batch): Keras 3's DataParallel on JAX shards every batch over the devices and cannot "
    "split one smaller than their number."
)


def on_jax(run: SmokeRun) -> bool:
    """A run of `smoke --backend jax` (its framework reads "keras 3.15.1 on jax 0.10.2")."""
    return " on jax " in f"{run.framework} "


def uneven_fix(run: SmokeRun) -> str:
    return JAX_UNEVEN_FIX if on_jax(run) else UNEVEN_FIX


def compare_with_single(runs: list[SmokeRun]) -> list[SmokeRun]:
    """Fill speedup, scaling efficiency and loss agreement on each N-device run."""
    out = []
    for run in runs:
        single = single_twin(run, runs)
        if run.devices > 1 and single is not None:
            speedup = (run.samples_per_s / single.samples_per_s
                       if run.samples_per_s and single.samples_per_s else None)
            run = replace(
                run,
                speedup=speedup,
                scaling_efficiency=speedup / run.devices if speedup is not None else None,
                loss_vs_single=_loss_difference(run, single),
            )
            run = _with_expected_difference(run, single)
        out.append(run)
    return out


def _with_expected_difference(run: SmokeRun, single: SmokeRun) -> SmokeRun:
    """From the 1-device twin's split training (same replicas): the expected 1-vs-N difference, and
    the layers that explain it or why it was not measured (copied onto the N-device run)."""
    if single.split_replicas != run.devices or run.devices < 2:
        return run
    split = replace(single, losses=single.split_losses)
    expected = _loss_difference(split, single) if single.split_losses else None
    skipped = single.split_skipped or ("" if expected is not None else "no finite loss in the split training")
    return replace(run, expected_loss_difference=expected, split_replicas=single.split_replicas,
                   split_layers=single.split_layers, split_skipped=skipped)


def smoke_outcomes(runs: list[SmokeRun], stall_timeout_s: float | None = None) -> list[CheckOutcome]:
    """One outcome per run, its findings sorted worst first."""
    outcomes = []
    for run in runs:
        if run.status == "skipped":  # this TensorFlow or Keras cannot train this way
            reason = run.skip_reason or run.error_message or "not supported by this TensorFlow"
            outcomes.append(CheckOutcome(run.name, _title(run), CheckStatus.SKIPPED, skip_reason=reason))
            continue
        findings = sorted(hazard_only(run, runs, run_findings(run, runs, stall_timeout_s)),
                          key=lambda f: f.severity, reverse=True)
        outcomes.append(CheckOutcome(run.name, _title(run), status_for(findings), findings))
    scaling_map = scaling_map_outcome(runs)
    if scaling_map is not None:
        outcomes.append(scaling_map)
    return outcomes


def hazard_only(run: SmokeRun, runs: list[SmokeRun], findings: list[Finding]) -> list[Finding]:
    """A failure only in the uneven-final-batch scenario, while the same model on the same devices
    trains with a dataset that is a multiple of the global batch, is a warning: it bites only a
    pipeline whose last batch leaves a replica without samples, and it has a fix. A failure of the
    common case stays an error."""
    even = _find(runs, run, scenario="even")
    if run.scenario != "uneven_final_batch" or even is None or even.status != "ok":
        return findings
    when = (f"only with an uneven final batch: the same model on {run.devices} device(s) with a "
            "dataset that is a multiple of the global batch trained; it bites when the last batch "
            "of an epoch leaves a replica without samples")
    fix = uneven_fix(run)
    return [replace(f, severity=Severity.WARNING, evidence=[*f.evidence, when],
                    fix=f.fix if fix in f.fix else f"{fix} {f.fix}")
            if f.severity is Severity.ERROR else f for f in findings]


def batch_split_outcomes(splits: list[BatchSplit]) -> list[CheckOutcome]:
    """A requested global batch that the replicas cannot share evenly: its own finding, with the fix."""
    if not splits:
        return []
    findings = [Finding(
        code="smoke.batch-indivisible", severity=Severity.WARNING,
        title=f"Global batch {s.requested} does not split evenly over {s.replicas} replicas "
              f"({s.shares}): the smoke runs used {s.planned}",
        evidence=[f"global batch {s.requested} over {s.replicas} replicas: per-replica batches {s.shares}",
                  f"planned instead: {s.planned} ({s.planned // s.replicas} per replica)"],
        fix=f"Use a global batch that is a multiple of the number of replicas (e.g. {s.planned}: "
            "per-replica batch × strategy.num_replicas_in_sync), so every replica gets the same "
            "number of samples each step.",
        links=[DISTRIBUTE_GUIDE],
    ) for s in splits]
    return [CheckOutcome("smoke/batch-split", "Smoke trainings: the global batch splits evenly over the "
                         "replicas", status_for(findings), findings)]


def run_findings(run: SmokeRun, runs: list[SmokeRun], stall_timeout_s: float | None = None) -> list[Finding]:
    code = f"smoke.{run.layer}"
    label = _label(run)
    if run.status in CHECKPOINT_STATUSES or (run.status == "ok" and run.checkpoint):
        return checkpoint_findings(run, label)
    if run.status == "hang":
        waited = f" for {stall_timeout_s:g} s" if stall_timeout_s else ""
        return [Finding(
            code=f"{code}.hang", severity=Severity.ERROR,
            title=f"{label}: the training hung (no step finished{waited})",
            evidence=[f"status: hang ({run.error_message})", "Python stacks when the hang was declared:",
                      *_head(run.stacks or run.stderr_tail)],
            fix=_hang_fix(run, runs), links=[DISTRIBUTE_GUIDE],
        )]
    if run.status == "oom":
        return [Finding(
            code=f"{code}.out-of-memory", severity=Severity.ERROR,
            title=f"{label}: the kernel's OOM killer ended the training (out of host memory); "
                  "this says nothing about the layer",
            evidence=[f"status: oom ({run.signal or 'SIGKILL'} while the kernel counted an OOM kill)",
                      *_attempts(run), *_trim(run.stderr_tail, 8)],
            fix="Free host memory (other jobs or processes on this machine) or raise this job's memory "
                "limit (the cgroup's memory.max, the scheduler's --mem), then run the smoke again: "
                "the layer was not tested.",
        )]
    if run.status == "crash":
        return [Finding(
            code=f"{code}.crash", severity=Severity.ERROR,
            title=f"{label}: the training process crashed with {run.signal or 'a signal'}"
                  + (" twice" if run.retried_after else ""),
            evidence=[f"signal: {run.signal}", *_attempts(run), *_trim(run.stderr_tail, 20)],
            fix=_other_variant_fix(run, runs) or (
                "Run the same model outside mgpu-doctor to get the native backtrace (for example "
                "under `gdb -ex run --args python train.py`), and check that the driver, CUDA and "
                "cuDNN versions match this TensorFlow build (`mgpu-doctor check`)."),
        )]
    if run.status == "error":
        collective = "collective" in run.error_message.lower()
        return [Finding(
            code=f"{code}.error", severity=Severity.ERROR,
            title=f"{label}: the training raised {run.error_type or 'an error'}",
            evidence=[f"error: {run.error_type}: {_last_line(run.error_message)}",
                      *_trim(run.error_message, 8)]
            + ([known_issue_line(COLLECTIVE_REUSE_ENTRY)] if collective else [])
            + (["Python stacks when it was stopped:", *_head(run.stacks)] if run.stacks else []),
            fix=_error_fix(run, runs),
            links=[COLLECTIVE_REUSE_ISSUE] if collective else [],
        )]
    if run.scenario == LEAK_SCENARIO:
        return leak_findings(run, label) + ([_retried_finding(run)] if run.retried_after else [])
    findings: list[Finding] = []
    if run.status == "nan":
        findings.append(_nan_finding(run, runs))
    elif run.status == "diverged":
        findings.append(Finding(
            code=f"{code}.diverged", severity=Severity.ERROR,
            title=f"{label}: the loss blew up ({_losses(run)})",
            evidence=[f"loss per epoch: {_losses(run)}"],
            fix="Compare with the 1-device run; if only N devices diverge, scale the learning rate "
                "with the global batch and check that the loss is reduced over the global batch.",
        ))
    if run.replicas_identical is False:
        findings.append(Finding(
            code=f"{code}.replicas-differ", severity=Severity.ERROR,
            title=f"{label}: the replicas ended with different weights",
            evidence=[f"largest difference between replica copies: {run.replica_max_abs_diff}"],
            fix="Create the model and optimizer inside `strategy.scope()` and do not assign "
                "variables per replica; a custom training step must all-reduce its gradients.",
            links=[DISTRIBUTE_GUIDE],
        ))
    findings.extend(_agreement_findings(run))
    findings.extend(_memory_findings(run))
    findings.extend(input_bound_findings(run, label))
    if not on_a_curve(run, runs):  # else the scaling map tells where N devices pay off
        findings.extend(_scaling_findings(run))
    if run.retried_after:
        findings.append(_retried_finding(run))
    if run.status == "ok":
        findings.append(Finding(code=f"{code}.ok", severity=Severity.OK,
                                title=f"trained, loss {_losses(run, last_only=True)}",
                                evidence=_measurements(run)))
    return findings


# Signals that come from outside the training (a scheduler, an operator, the OOM killer), not
# from a fault in it: a first attempt ended by one of them and a good retry is not a warning.
OUTSIDE_SIGNALS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP")


def _attempts(run: SmokeRun) -> list[str]:
    if not run.retried_after:
        return []
    return [f"first attempt: {run.retried_after}; tried once more: {run.status}"
            + (f" ({run.signal})" if run.signal else "")]


def _retried_finding(run: SmokeRun) -> Finding:
    """A first attempt died by a signal and the retry got further than a crash."""
    first = run.retried_after
    outside = any(first.startswith(f"died by {sig}") for sig in OUTSIDE_SIGNALS) or "OOM killer" in first
    if outside:
        return Finding(
            code=f"smoke.{run.layer}.retried", severity=Severity.INFO,
            title=f"{_label(run)}: the first attempt was {first.replace('died by', 'ended by')}, "
                  "from outside the training; the retry decided",
            evidence=_attempts(run),
            fix="Nothing to do for the layer; on a shared machine other jobs can kill or starve "
                "a training.",
        )
    return Finding(
        code=f"smoke.{run.layer}.intermittent-crash", severity=Severity.WARNING,
        title=f"{_label(run)}: the training {first} once and not when tried again",
        evidence=_attempts(run),
        fix="A crash that comes and goes is often a race or uninitialised memory in a native "
            "library: run the smoke again, and compare the driver, CUDA and cuDNN versions with "
            "this TensorFlow build (`mgpu-doctor check`).",
    )


def _nan_finding(run: SmokeRun, runs: list[SmokeRun]) -> Finding:
    where = f" from epoch {run.nonfinite_epoch}" if run.nonfinite_epoch else ""
    evidence = [f"loss per epoch: {_losses(run)}", f"weights finite at the end: {run.weights_finite}",
                *origin_lines(run.nonfinite_origin)]
    even = _find(runs, run, scenario="even")
    single, single_label = _single_reference(run, runs) if run.devices > 1 else (None, "")
    if even is not None:
        evidence.append(f"same model, dataset a multiple of the global batch: {even.status}")
    if single is not None:
        evidence.append(f"{single_label}: {single.status}")
    uneven_only = run.scenario == "uneven_final_batch" and even is not None and even.status == "ok"
    if uneven_only:
        evidence.append(f"{run.samples} samples, global batch {run.global_batch}: the last batch "
                        f"has {run.samples % run.global_batch} sample(s) for {run.devices} replicas, "
                        "so some replicas get none")
        fix = uneven_fix(run)
    else:
        fix = ("Find the first non-finite value with `tf.debugging.enable_check_numerics()`; "
               "lower the learning rate or use loss scaling with mixed precision.")
    origin = run.nonfinite_origin
    if origin is not None and origin.kind == "loss" and not uneven_only:
        fix = ("The loss itself made the first NaN/Inf while every layer's output was finite: guard "
               "what it takes a log, a root or a quotient of (`tf.math.log(tf.maximum(y_pred, eps))`, "
               "`tf.math.divide_no_nan`), or use Keras' own loss of that name.")
    elif origin is not None and origin.kind == "layer" and not uneven_only:
        fix = (f"Layer {origin.name} ({origin.layer_class}) made the first NaN/Inf from finite inputs: "
               "check its weights and what it computes (a log, a root, a division, an exp that "
               "overflows), and lower the learning rate. " + fix)
    losses_finite = bool(run.losses) and None not in run.losses
    what = (f"{origin.value or 'NaN'} in {origin_short(origin)}" if origin is not None and origin.kind
            and origin.kind != "step" else "")
    if what:
        when = f" in step {origin.step} of epoch {origin.epoch}" if origin and origin.step else where
        title = f"{_label(run)}: {what}{when}" + (" (the loss stayed finite)" if losses_finite else "")
    else:
        title = f"{_label(run)}: the loss became NaN{where}"
    return Finding(
        code=f"smoke.{run.layer}.nan", severity=Severity.ERROR,
        title=title + (" with an uneven final batch" if uneven_only else ""),
        evidence=evidence, fix=fix, links=[DISTRIBUTE_GUIDE],
    )


def _agreement_findings(run: SmokeRun) -> list[Finding]:
    diff = run.loss_vs_single
    tolerance = loss_tolerance(run)
    if diff is None or run.status != "ok":
        return []
    if diff <= tolerance:
        return _expected_difference_findings(run, diff, tolerance)
    label = _label(run)
    evidence = [f"largest relative loss difference, {run.devices} devices vs 1: {diff:.2%}",
                f"loss per epoch on {run.devices} devices: {_losses(run)}", *_expected_lines(run)]
    if run.layer == "batchnorm" and run.variant == "plain":
        if run.replica_state_max_abs_diff:
            evidence.append(f"the replicas' copies of the moving mean and variance differ by up to "
                            f"{run.replica_state_max_abs_diff:.3g}: each replica kept its own")
        return [Finding(
            code="smoke.batchnorm.unsynced-statistics", severity=Severity.INFO,
            title=f"{label}: the loss differs from 1 device, as expected without synchronized "
                  "BatchNormalization",
            evidence=evidence,
            fix="Nothing to do if this is acceptable; `BatchNormalization(synchronized=True)` "
                "computes the statistics over the global batch, like one device.",
        )]
    if run.scenario == "uneven_final_batch":
        return [Finding(
            code=f"smoke.{run.layer}.uneven-final-batch", severity=Severity.INFO,
            title=f"{label}: the partial last batch trains differently on {run.devices} devices",
            evidence=evidence + ["replicas without samples in the last batch still count in the "
                                 "gradient average"],
            fix="Drop the last partial batch (`dataset.batch(global_batch, drop_remainder=True)`) "
                "or make the dataset size a multiple of the global batch.",
        )]
    expected = run.expected_loss_difference
    beyond = (f" beyond the {expected:.2%} its layers explain" if expected is not None and run.split_layers
              else "")
    return [Finding(
        code=f"smoke.{run.layer}.loss-mismatch", severity=Severity.WARNING,
        title=f"{label}: the loss differs from the 1-device run by {diff:.2%}{beyond} "
              f"(tolerance {tolerance:.1%})",
        evidence=evidence,
        fix="Same seed and global batch should give the same loss. Check that the loss is "
            "averaged over the global batch, that every replica sees different data, and that no "
            "layer or loss depends on the replica it runs on (`replica_id_in_sync_group`, "
            "per-replica state or seeds).",
        links=[DISTRIBUTE_GUIDE],
    )]


def _expected_lines(run: SmokeRun) -> list[str]:
    """What the 1-device split training says of the user's model (evidence), or why it said nothing."""
    if not run.split_replicas:
        return []
    layers = ", ".join(run.split_layers)
    if run.expected_loss_difference is None:
        return [f"layers that differ per replica by design: {layers or 'none found'}",
                f"expected difference not measured ({run.split_skipped}): tolerance "
                f"{USER_MODEL_LOSS_TOLERANCE:.0%}"]
    why = (f"its layers that differ per replica by design ({layers})" if layers else
           "no layer of the model differs per replica by design (BatchNormalization, Dropout, noise)")
    return [f"expected difference: {run.expected_loss_difference:.2%}, {why}: measured on 1 device "
            f"training again with each global batch split {run.split_replicas} ways, as the replicas "
            "split it",
            f"tolerance: {EXPECTED_MARGIN:g} x the expected difference, at least {USER_MODEL_LOSS_FLOOR:.0%}"]


def _expected_difference_findings(run: SmokeRun, diff: float, tolerance: float) -> list[Finding]:
    """A difference of the user's model above the stock tolerance that its layers explain: info."""
    if run.expected_loss_difference is None or not run.split_layers or diff <= LOSS_TOLERANCE:
        return []
    return [Finding(
        code=f"smoke.{run.layer}.expected-difference", severity=Severity.INFO,
        title=f"{_label(run)}: the loss differs from 1 device by {diff:.2%}, as its "
              f"{', '.join(run.split_layers)} make it differ on {run.devices} replicas "
              f"(expected {run.expected_loss_difference:.2%})",
        evidence=[f"largest relative loss difference, {run.devices} devices vs 1: {diff:.2%} "
                  f"(tolerance {tolerance:.1%})", f"loss per epoch on {run.devices} devices: {_losses(run)}",
                  *_expected_lines(run)],
        fix="Nothing to do: BatchNormalization normalises each replica's share of the batch, Dropout "
            "and noise layers draw per replica. `BatchNormalization(synchronized=True)` computes the "
            "statistics over the global batch, like one device, if that matters.",
    )]


def _memory_findings(run: SmokeRun) -> list[Finding]:
    out = []
    for what, values, slope, limit in (
        ("host memory (RSS)", run.rss_mb, run.rss_slope_mb_per_epoch, LEAK_MB_PER_EPOCH),
        ("GPU memory", run.gpu_memory_mb, run.gpu_memory_slope_mb_per_epoch, GPU_LEAK_MB_PER_EPOCH),
    ):
        if slope is None or slope <= limit:
            continue
        out.append(Finding(
            code=f"smoke.{run.layer}.memory-growth", severity=Severity.WARNING,
            title=f"{_label(run)}: {what} grows by {slope:.0f} MB per epoch",
            evidence=[f"{what} after each epoch (MB): " + ", ".join(f"{v:.0f}" for v in values),
                      f"threshold: {limit:.0f} MB per epoch after the first"],
            fix="A leak grows with every epoch: look for tensors kept in Python lists or callbacks, "
                "`tf.function`s retraced each step, or a TensorFlow/Keras version with a known leak "
                "(`mgpu-doctor check`).",
        ))
    return out


def _scaling_findings(run: SmokeRun) -> list[Finding]:
    if run.speedup is None or run.simulated or run.speedup >= POOR_SCALING or run.status != "ok":
        return []
    return [Finding(
        code=f"smoke.{run.layer}.poor-scaling", severity=Severity.WARNING,
        title=f"{_label(run)}: {run.devices} GPUs are slower than 1 ({run.speedup:.2f}x)",
        evidence=_measurements(run),
        fix="Give each GPU more work: a larger global batch (scale it with the number of GPUs; "
            "try `--batch-sizes 64,256,1024`), and keep the GPUs fed with `dataset.cache()` and "
            "`dataset.prefetch(tf.data.AUTOTUNE)`.",
        links=[INPUT_GUIDE],
    )]


def _hang_fix(run: SmokeRun, runs: list[SmokeRun]) -> str:
    other = _other_variant_fix(run, runs)
    if other:
        return other
    return ("The stacks show where it waited. A hang across devices is usually a collective "
            "all-reduce waiting for a replica: try `NCCL_P2P_DISABLE=1`, or "
            "`tf.distribute.MirroredStrategy(cross_device_ops=tf.distribute.HierarchicalCopyAllReduce())`.")


def _error_fix(run: SmokeRun, runs: list[SmokeRun]) -> str:
    if "collective" in run.error_message.lower():
        return ("A collective op failed between replicas. Run one MirroredStrategy model per "
                "process, and make every replica see the same shapes (" + UNEVEN_FIX + ")")
    if on_jax(run):
        return _other_variant_fix(run, runs) or (
            "Read the error above; if it only happens on N devices, train the model on one device "
            "without `keras.distribution.set_distribution` to tell the layer from the distribution.")
    return _other_variant_fix(run, runs) or (
        "Read the error above; if it only happens on N devices, check that the model and "
        "optimizer are created inside `strategy.scope()`.")


def _other_variant_fix(run: SmokeRun, runs: list[SmokeRun]) -> str:
    row = SMOKE_LAYERS.get(run.layer)
    if row is None or not row.cudnn:
        return ""
    other = "generic" if run.variant == "cudnn" else "cudnn"
    twin = _find(runs, run, variant=other)
    cls = run.layer.upper()
    if other == "cudnn":
        how = f"`{cls}(...)` with its default arguments (cuDNN-eligible)"
    elif run.framework.startswith(KERAS_2_FRAMEWORKS):  # it takes cuDNN only when not unrolled
        how = f"`{cls}(..., unroll=True)`, which never takes the cuDNN kernel"
    else:
        how = f"`{cls}(..., use_cudnn=False)`"
    if twin is not None and twin.status == "ok":
        return f"The {other} {cls} passed the same test: use {how}."
    return f"Try the {other} implementation: {how}."


def _find(runs: list[SmokeRun], like: SmokeRun, **changes: object) -> SmokeRun | None:
    want = {**{"layer": like.layer, "variant": like.variant, "devices": like.devices,
               "scenario": like.scenario, "global_batch": like.global_batch,
               "model_size": like.model_size}, **changes}
    for r in runs:
        if all(getattr(r, k) == v for k, v in want.items()):
            return r
    return None


def single_twin(run: SmokeRun, runs: list[SmokeRun]) -> SmokeRun | None:
    """The 1-device run that trained the same model on the same data: of the same variant, else
    of the variant that trains the same there (the plan runs that one once for both)."""
    same = [run.variant]
    if same_on_one_device(run.layer, run.variant):
        same.append(same_on_one_device(run.layer, run.variant))
    if run.simulated and same_without_cudnn(run.layer, run.variant):
        same.append(same_without_cudnn(run.layer, run.variant))
    for variant in same:
        for r in runs:
            if (r.devices == 1 and r.variant == variant and r.layer == run.layer
                    and r.scenario == run.scenario and r.global_batch == run.global_batch
                    and r.model_size == run.model_size and r.device_kind == run.device_kind):
                return r
    return None


def _single_reference(run: SmokeRun, runs: list[SmokeRun]) -> tuple[SmokeRun | None, str]:
    """For the evidence: the 1-device twin, else (levels that skip it) the 1-device run of the
    dataset that is a multiple of the global batch; and how to name it."""
    twin = single_twin(run, runs)
    if twin is not None:
        return twin, "same data on 1 device"
    even = single_twin(replace(run, scenario="even"), runs)
    return even, "same model on 1 device, dataset a multiple of the global batch"


def _loss_difference(run: SmokeRun, single: SmokeRun) -> float | None:
    if run.status != "ok" or single.status != "ok" or len(run.losses) != len(single.losses):
        return None
    worst = 0.0
    for a, b in zip(run.losses, single.losses, strict=True):
        if a is None or b is None:
            return None
        worst = max(worst, abs(a - b) / max(abs(b), 1e-8))
    return worst


def _title(run: SmokeRun) -> str:
    where = f"{run.devices} simulated CPU device(s)" if run.simulated else f"{run.devices} GPU(s)"
    titles = {"uneven_final_batch": "uneven final batch", **SCENARIO_TITLES,
              LEAK_SCENARIO: "leak probe (fit, predict and evaluate called over and over)",
              **{name: way.title for name, way in USAGE_SCENARIOS.items()}}
    scenario = titles.get(run.scenario, "even batches")
    size = f", model size x{run.model_size}" if run.model_size != 1 else ""
    return (f"Smoke training: {_layer_label(run)} on {where}, {scenario}, global batch "
            f"{run.global_batch}{size}")


def _layer_label(run: SmokeRun) -> str:
    return f"{run.layer} ({run.variant})" if run.variant else run.layer


def _label(run: SmokeRun) -> str:
    kind = "simulated CPU devices" if run.simulated else "GPUs"
    way = f" ({run.scenario.replace('_', ' ')})" if run.scenario in USAGE_SCENARIOS else ""
    return f"{_layer_label(run)}{way} on {run.devices} {kind}"


def loss_tolerance(run: SmokeRun) -> float:
    """How far the N-device loss may be from the 1-device one (relative)."""
    if run.layer == USER_MODEL:
        if run.expected_loss_difference is not None:
            return max(USER_MODEL_LOSS_FLOOR, EXPECTED_MARGIN * run.expected_loss_difference)
        return USER_MODEL_LOSS_TOLERANCE
    way = USAGE_SCENARIOS.get(run.scenario)
    return way.loss_tolerance if way is not None and way.loss_tolerance is not None else LOSS_TOLERANCE


def _losses(run: SmokeRun, last_only: bool = False) -> str:
    values = ["nan" if v is None else f"{v:.4g}" for v in run.losses]
    if last_only and len(values) > 1:
        return f"{values[0]} -> {values[-1]}"
    return ", ".join(values) or "none"


def _measurements(run: SmokeRun) -> list[str]:
    lines = [f"loss per epoch: {_losses(run)}"]
    if run.median_step_s is not None and run.samples_per_s is not None:
        lines.append(f"median step: {run.median_step_s * 1000:.1f} ms, {run.samples_per_s:.0f} samples/s")
    if run.speedup is not None and run.scaling_efficiency is not None:
        note = " (simulated on one CPU: says nothing about GPUs)" if run.simulated else ""
        lines.append(f"speedup vs 1 device: {run.speedup:.2f}x, scaling efficiency "
                     f"{run.scaling_efficiency:.0%}{note}")
    lines.extend(input_rates(run))
    if run.loss_vs_single is not None:
        lines.append(f"loss vs 1 device: {run.loss_vs_single:.2e} relative")
    if run.replicas_identical is not None:
        lines.append(f"replicas hold identical weights: {'yes' if run.replicas_identical else 'no'}")
    if run.rss_slope_mb_per_epoch is not None:
        lines.append(f"host RSS growth: {run.rss_slope_mb_per_epoch:.1f} MB/epoch")
    if run.parameters is not None:
        lines.append(f"model: {run.parameters:,} parameters (size x{run.model_size})")
    if run.framework:
        lines.append(f"framework: {run.framework}")
    return lines


def _trim(text: str, limit: int = MAX_STACK_LINES) -> list[str]:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    return lines[-limit:]


def _head(text: str, limit: int = MAX_STACK_LINES) -> list[str]:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    return lines[:limit] + ([f"... {len(lines) - limit} more lines"] if len(lines) > limit else [])


def _last_line(text: str) -> str:
    lines = _trim(text, 1)
    return lines[0] if lines else ""
