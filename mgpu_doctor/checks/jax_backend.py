"""JAX: the GPUs it sees against NVML's, its memory preallocation, and Keras 3 set to run on it.

JAX's GPU client preallocates 75 % of each GPU's *total* memory at the first JAX operation unless
``XLA_PYTHON_CLIENT_PREALLOCATE`` is ``false``/``False``/``0`` or the allocator is ``platform``
(https://docs.jax.dev/en/latest/gpu_memory_allocation.html; the values are those jaxlib's
``xla_client.py`` reads). ``XLA_CLIENT_MEM_FRACTION`` (deprecated name:
``XLA_PYTHON_CLIENT_MEM_FRACTION``; both set is an error) changes the 75 %.
"""

from __future__ import annotations

import re

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import gib, need, need_gpus, need_nvml, need_packages, skip_reason
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.environment.visibility import visible_gpus
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import JaxFacts, Snapshot
from mgpu_doctor.model.unavailable import Unavailable

DOCS = "https://docs.jax.dev/en/latest/gpu_memory_allocation.html"
INSTALL_DOCS = "https://docs.jax.dev/en/latest/installation.html"
DEFAULT_FRACTION = 0.75
PREALLOCATE_OFF = ("false", "False", "0")  # exactly what jaxlib compares against
PLUGIN = re.compile(r"^jax-cuda(\d+)-(plugin|pjrt)$")

GPUS_CODES = (
    "jax.gpus-match",
    "jax.import-failed",
    "jax.cpu-only-jaxlib",
    "jax.plugin-needs-newer-driver",
    "jax.plugin-version-mismatch",
    "jax.cuda-wheels-missing",
    "jax.platforms-exclude-gpu",
    "jax.fewer-gpus-mig",
    "jax.fewer-gpus-than-nvml",
    "jax.more-gpus-than-nvml",
)


def need_jax(snapshot: Snapshot) -> JaxFacts | Unavailable:
    """JAX's facts; skipped where it is not installed or was not asked for (a failure is a finding)."""
    jax = snapshot.jax
    if isinstance(jax, Unavailable) and (jax.reason == "absent" or not jax_on_machine(snapshot)
                                         and not isinstance(snapshot.packages, Unavailable)):
        raise CheckSkipped("JAX is not installed")  # also where an older snapshot's packages say so
    if isinstance(jax, Unavailable) and jax.reason != "failed":
        raise CheckSkipped(skip_reason("JAX's view", jax))
    return jax


def plugin_cuda_majors(jax: JaxFacts) -> list[int]:
    return sorted({int(m.group(1)) for name in jax.plugins if (m := PLUGIN.match(name))})


def install_extra(driver_cuda: str | Unavailable) -> str:
    """``jax[cuda13]`` for a driver that runs CUDA 13, else ``jax[cuda12]``."""
    major = _major(driver_cuda)
    return "jax[cuda13]" if major is not None and major >= 13 else "jax[cuda12]"


def check_jax_gpus(snapshot: Snapshot) -> list[Finding]:
    """JAX should see exactly the GPUs that NVML reports as visible to CUDA."""
    nvml = need_nvml(snapshot)  # the yardstick first: without it there is nothing to compare
    jax = need_jax(snapshot)
    if isinstance(jax, Unavailable):
        return [Finding("jax.import-failed", Severity.WARNING, "JAX is installed but does not import",
                        [f"JAX probe: {jax.detail.splitlines()[0] if jax.detail else jax.cause}"],
                        fix="Run `python -c 'import jax'` to see the whole error; reinstall with "
                        "`pip install -U jax` (plus the CUDA extra for GPUs).", links=[INSTALL_DOCS])]
    devices = need(jax.devices, "JAX's device list")
    jax_gpus = [d for d in devices if d.platform in ("gpu", "cuda")]
    cvd = snapshot.env.get("CUDA_VISIBLE_DEVICES")
    visible = visible_gpus(nvml.gpus, cvd, snapshot.env.get("CUDA_DEVICE_ORDER")).visible
    expected = len(visible)
    platforms = snapshot.env.get("JAX_PLATFORMS")
    evidence = [
        f"JAX: {jax.version}, jaxlib: {jax.jaxlib_version}",
        f"CUDA plugin: {', '.join(f'{n} {v}' for n, v in sorted(jax.plugins.items())) or 'none installed'}",
        f"NVML: {len(nvml.gpus)} GPU(s), driver supports CUDA {nvml.cuda_driver_version}",
        f"CUDA_VISIBLE_DEVICES: {cvd!r}" if cvd is not None else "CUDA_VISIBLE_DEVICES: not set",
        f"expected visible to JAX: {expected}",
        f"JAX sees: {len(jax_gpus)} GPU(s) (default backend: {jax.default_backend})",
    ] + ([f"JAX_PLATFORMS: {platforms!r}"] if platforms is not None else [])
    if len(jax_gpus) == expected:
        if expected == 0:
            raise CheckSkipped("no GPU is visible, so there is nothing for JAX to see")
        return [Finding("jax.gpus-match", Severity.OK, f"all {expected} visible GPU(s)", evidence)]
    if len(jax_gpus) > expected:
        return [Finding("jax.more-gpus-than-nvml", Severity.WARNING,
                        f"JAX sees {len(jax_gpus)} GPU(s) but NVML reports {expected} visible", evidence,
                        fix="NVML's answer may be incomplete (see the NVML check) or the snapshot mixes two "
                        "machines; run `nvidia-smi -L` and compare.")]
    evidence += [f"JAX said ({name}): {text}" for name, text in sorted(jax.backend_errors.items())
                 if name in ("cuda", "gpu", "rocm")][:3]
    evidence += [f"JAX warned: {w}" for w in jax.warnings if "GPU" in w or "CUDA" in w][:3]
    extra = install_extra(nvml.cuda_driver_version)
    title = f"JAX sees {len(jax_gpus)} of the {expected} GPU(s) NVML reports as visible"
    if platforms is not None and platforms.strip() and not any(
            p.strip() in ("cuda", "gpu", "rocm") for p in platforms.split(",")):
        return [Finding("jax.platforms-exclude-gpu", Severity.WARNING,
                        f"{title}: JAX_PLATFORMS={platforms!r} leaves the GPUs out", evidence,
                        fix="Unset JAX_PLATFORMS, or name cuda in it (JAX_PLATFORMS=cuda,cpu).")]
    mig = [g.index for g in nvml.gpus if g.index in visible and g.mig_mode is True]
    if mig:
        return [Finding("jax.fewer-gpus-mig", Severity.WARNING,
                        f"{title}; MIG is enabled on GPU {', '.join(map(str, mig))}", evidence,
                        fix="A CUDA process sees at most one MIG instance: see the MIG check.")]
    majors = plugin_cuda_majors(jax)
    if not majors:
        return [Finding("jax.cpu-only-jaxlib", Severity.ERROR,
                        f"{title}: no JAX CUDA plugin is installed, and jaxlib alone runs on the CPU",
                        evidence, fix=f"pip install -U \"{extra}\" (the CUDA plugin and the nvidia-* wheels "
                        "it needs; the driver's CUDA decides 12 or 13).", links=[INSTALL_DOCS])]
    driver_major = _major(nvml.cuda_driver_version)
    if driver_major is not None and min(majors) > driver_major:
        return [Finding("jax.plugin-needs-newer-driver", Severity.ERROR,
                        f"{title}: the JAX CUDA plugin is built for CUDA {min(majors)}, the driver "
                        f"{nvml.driver_version} runs CUDA up to {nvml.cuda_driver_version}",
                        evidence, fix=f"pip uninstall -y {' '.join(sorted(jax.plugins))} && pip install -U "
                        f"\"jax[cuda{driver_major}]\", or upgrade the NVIDIA driver to one for CUDA "
                        f"{min(majors)}.", links=[INSTALL_DOCS])]
    jaxlib = jax.jaxlib_version if isinstance(jax.jaxlib_version, str) else ""
    stale = sorted(f"{n} {v}" for n, v in jax.plugins.items() if jaxlib and v != jaxlib)
    if stale:
        return [Finding("jax.plugin-version-mismatch", Severity.ERROR,
                        f"{title}: the CUDA plugin ({', '.join(stale)}) is not jaxlib's version {jaxlib}",
                        evidence, fix=f"pip install -U \"jax[cuda{min(majors)}]\" (JAX loads only a plugin "
                        "of its own jaxlib's version).", links=[INSTALL_DOCS])]
    if jax.plugin_wheels_missing:
        return [Finding("jax.cuda-wheels-missing", Severity.ERROR,
                        f"{title}: the CUDA plugin is installed without the nvidia-* wheels its "
                        f"with-cuda extra needs ({', '.join(jax.plugin_wheels_missing[:4])}"
                        f"{', ...' if len(jax.plugin_wheels_missing) > 4 else ''})", evidence,
                        fix=f"pip install -U \"jax[cuda{min(majors)}]\" (installs them), or, for a local "
                        "CUDA toolkit (jax[cuda*-local]), put its libraries on LD_LIBRARY_PATH.",
                        links=[INSTALL_DOCS])]
    return [Finding("jax.fewer-gpus-than-nvml", Severity.ERROR, title, evidence,
                    fix="A CUDA library JAX needs did not load, or the plugin failed: run "
                    "`python -c \"import jax; print(jax.devices())\"` and read JAX's warning, and "
                    "`mgpu-doctor libs`.", links=[INSTALL_DOCS])]


PREALLOCATION_CODES = (
    "jax.preallocation-off",
    "jax.preallocation-unshared",
    "jax.preallocation-shared",
    "jax.mem-fraction-twice",
    "jax.mem-fraction-invalid",
)


def check_jax_preallocation(snapshot: Snapshot) -> list[Finding]:
    """Preallocation (75 % of each GPU by default) left on where other processes use the GPUs."""
    nvml = need_gpus(snapshot)
    if not jax_on_machine(snapshot):
        need_packages(snapshot)  # whether JAX is installed is not known when they failed
        raise CheckSkipped("JAX is not installed")
    env = snapshot.env
    preallocate = env.get("XLA_PYTHON_CLIENT_PREALLOCATE")
    allocator = env.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default").lower()
    new, old = env.get("XLA_CLIENT_MEM_FRACTION", ""), env.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "")
    settings = [f"{name}: {env[name]!r}" if name in env else f"{name}: not set" for name in
                ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_CLIENT_MEM_FRACTION",
                 "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")]
    if new and old:
        return [Finding("jax.mem-fraction-twice", Severity.ERROR,
                        "XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are both set: JAX "
                        "refuses to start its GPU client", settings,
                        fix="Unset XLA_PYTHON_CLIENT_MEM_FRACTION (the deprecated name).", links=[DOCS])]
    text = new or old
    try:
        fraction = float(text) if text else DEFAULT_FRACTION
    except ValueError:
        name = "XLA_CLIENT_MEM_FRACTION" if new else "XLA_PYTHON_CLIENT_MEM_FRACTION"
        return [Finding("jax.mem-fraction-invalid", Severity.ERROR,
                        f"{name}={text!r} is not a number: JAX's GPU client will not start", settings,
                        fix="Set it to a fraction such as .45, or unset it.", links=[DOCS])]
    if (preallocate is not None and preallocate in PREALLOCATE_OFF) or allocator == "platform":
        why = "XLA_PYTHON_CLIENT_ALLOCATOR=platform" if allocator == "platform" else \
            f"XLA_PYTHON_CLIENT_PREALLOCATE={preallocate}"
        return [Finding("jax.preallocation-off", Severity.OK, f"preallocation off ({why})", settings)]
    visible = visible_gpus(nvml.gpus, env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER")).visible
    gpus = [g for g in nvml.gpus if g.index in visible]
    busy = [g for g in gpus if isinstance(g.processes, list) and g.processes]
    share = f"{fraction * 100:.0f} %"
    if not busy:
        return [Finding("jax.preallocation-unshared", Severity.OK,
                        f"preallocation on ({share} of each GPU at JAX's first operation); no other process "
                        "uses the GPUs", settings)]
    evidence = list(settings)
    short = []
    for g in busy:
        want = int(g.memory_total_bytes * fraction)
        used = g.memory_used_bytes if isinstance(g.memory_used_bytes, int) else 0
        free = g.memory_total_bytes - used
        evidence.append(f"GPU {g.index}: {len(g.processes)} other process(es) (pid "  # type: ignore[arg-type]
                        f"{', '.join(str(p.pid) for p in g.processes[:4])}), {gib(used)} used, "  # type: ignore[index]
                        f"JAX would take {gib(want)} of {gib(g.memory_total_bytes)}")
        if want > free:
            short.append(g.index)
    title = (f"JAX preallocates {share} of each GPU's memory at its first operation while other processes "
             f"use GPU {', '.join(str(g.index) for g in busy)}")
    if short:
        title += f": it does not fit on GPU {', '.join(map(str, short))}"
    return [Finding("jax.preallocation-shared", Severity.WARNING, title, evidence,
                    fix="Set XLA_PYTHON_CLIENT_PREALLOCATE=false (allocate as needed), or give each process "
                    "its share with XLA_CLIENT_MEM_FRACTION=.NN (older JAX: XLA_PYTHON_CLIENT_MEM_FRACTION); "
                    "a TensorFlow beside JAX preallocates too (tf.config.experimental.set_memory_growth).",
                    links=[DOCS])]


KERAS_BACKEND_CODES = (
    "jax.keras-backend-ok",
    "jax.keras-backend-missing",
    "jax.keras-backend-broken",
)


def check_keras_backend_jax(env: ResolvedEnvironment) -> list[Finding]:
    """Keras 3 told to run on JAX (KERAS_BACKEND=jax) needs JAX that imports."""
    snapshot = env.snapshot
    if snapshot is None:
        raise CheckSkipped("needs a machine's facts, not a list of versions")
    backend = snapshot.env.get("KERAS_BACKEND", "").strip().lower()
    if backend != "jax":
        raise CheckSkipped(f"KERAS_BACKEND is {backend!r}, not jax" if backend
                           else "KERAS_BACKEND is not set")
    if env.keras.absent:
        raise CheckSkipped("Keras is not installed")
    if env.keras.version is not None and env.keras.version.major < 3:
        raise CheckSkipped(f"Keras {env.keras.text} is not Keras 3 (no JAX backend)")
    evidence = [f"KERAS_BACKEND: {snapshot.env.get('KERAS_BACKEND')!r}", f"keras: {env.keras.describe()}",
                f"jax: {env.jax.describe()}", f"jaxlib: {env.jaxlib.describe()}"]
    if env.jax.absent:
        return [Finding("jax.keras-backend-missing", Severity.ERROR,
                        "KERAS_BACKEND=jax, but JAX is not installed: `import keras` fails", evidence,
                        fix="pip install -U \"jax[cuda12]\" (jax[cuda13] for a CUDA 13 driver; plain jax for "
                        "the CPU), or unset KERAS_BACKEND to train on TensorFlow.", links=[INSTALL_DOCS])]
    if isinstance(snapshot.jax, Unavailable) and snapshot.jax.reason == "failed":
        said = snapshot.jax.detail.splitlines()[0] if snapshot.jax.detail else snapshot.jax.cause
        return [Finding("jax.keras-backend-broken", Severity.ERROR,
                        "KERAS_BACKEND=jax, but JAX does not import: `import keras` fails",
                        evidence + [f"JAX probe: {said}"],
                        fix="Run `python -c 'import jax'` to see the whole error and reinstall JAX.",
                        links=[INSTALL_DOCS])]
    return [Finding("jax.keras-backend-ok", Severity.OK, f"Keras {env.keras.text} on JAX {env.jax.text}",
                    evidence)]


def jax_on_machine(snapshot: Snapshot) -> bool:
    if not isinstance(snapshot.jax, Unavailable):
        return True
    packages = snapshot.packages
    return not isinstance(packages, Unavailable) and "jax" in packages.versions


def _major(text: str | Unavailable) -> int | None:
    if not isinstance(text, str):
        return None
    head = text.split(".")[0]
    return int(head) if head.isdecimal() else None
