"""The nvidia-* wheels installed against the pins of ``tensorflow[and-cuda]``."""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_some_gpu
from mgpu_doctor.checks.tensorflow_build import TF_PIP_DOC
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.versions import Tri, version_in

CODES = ("and-cuda.ok", "and-cuda.missing", "and-cuda.out-of-range")


def check_and_cuda_wheels(env: ResolvedEnvironment) -> list[Finding]:
    """The `tensorflow[and-cuda]` pins of TensorFlow against the nvidia-* wheels installed (or named)."""
    if env.snapshot is not None:
        need_some_gpu(env.snapshot)
    if not env.tensorflow.known:
        raise CheckSkipped("no TensorFlow distribution installed")
    tf_name = env.tensorflow_distribution or "tensorflow"
    tf_version = env.tensorflow.text
    pins = env.and_cuda_pins
    if not pins:
        raise CheckSkipped(f"{tf_name} {tf_version} declares no [and-cuda] extra"
                           + ("" if env.snapshot is not None else " in the pins table"))
    from packaging.utils import canonicalize_name  # slow to import (packaging.tags); needed here only

    installed = {canonicalize_name(r.name): env.wheels.get(canonicalize_name(r.name)) for r in pins}
    if not any(installed.values()):
        raise CheckSkipped("no nvidia-* wheel of tensorflow[and-cuda] is installed (system CUDA is used)"
                           if env.snapshot is not None else "no nvidia-* wheel named")
    findings = []
    fix_all = f"pip install '{tf_name}[and-cuda]=={tf_version}'"
    source = f" ({env.and_cuda_source})" if env.and_cuda_source else ""
    locations = {} if env.snapshot is None or isinstance(env.snapshot.packages, Unavailable) \
        else env.snapshot.packages.locations
    for req in pins:
        name = canonicalize_name(req.name)
        have = installed[name]
        if not have:
            if env.snapshot is None:
                continue  # a query names only some wheels
            findings.append(Finding(
                "and-cuda.missing", Severity.ERROR,
                f"{name} is missing: tensorflow[and-cuda] {tf_version} needs {name}{req.specifier}",
                [f"{tf_name}=={tf_version} requires: {req}{source}"], fix=fix_all, links=[TF_PIP_DOC],
            ))
            continue
        if version_in(have, req.specifier) is Tri.NO:
            findings.append(Finding(
                "and-cuda.out-of-range", Severity.ERROR,
                f"{name} {have} is outside the range tensorflow[and-cuda] {tf_version} pins "
                f"({req.specifier})",
                [f"{tf_name}=={tf_version} requires: {req}{source}",
                 f"installed: {name}=={have}" + (f" in {locations[name]}" if name in locations else "")],
                fix=f"pip install '{name}{req.specifier}' (or: {fix_all})", links=[TF_PIP_DOC],
            ))
    if not findings:
        findings.append(Finding(
            "and-cuda.ok", Severity.OK,
            f"{sum(1 for v in installed.values() if v)} wheels, pinned by TensorFlow {tf_version}",
            [f"{canonicalize_name(r.name)}=={installed[canonicalize_name(r.name)]} ({r.specifier})"
             for r in pins if installed[canonicalize_name(r.name)]],
        ))
    return findings
