"""What TensorFlow was built for (CUDA, cuDNN), as resolved, and where that came from."""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.environment.readings import ResolvedVersion
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.record import record

TF_SOURCE_DOC = "https://www.tensorflow.org/install/source#gpu"
TF_PIP_DOC = "https://www.tensorflow.org/install/pip"


@record
class BuiltFor:
    """What TensorFlow was built against, and where that came from."""

    tensorflow: str
    cuda: str  # "12.5"
    cudnn: str  # "9.3" ("9" when only the major is known)
    source: str


def built_for(env: ResolvedEnvironment) -> BuiltFor:
    """TensorFlow's CUDA/cuDNN as resolved (build info, refined by the tested-builds table)."""
    if env.cpu_only_build:
        raise CheckSkipped(f"TensorFlow {env.tensorflow.text} is a CPU-only build")
    if not env.built_cuda.known:
        if not env.tensorflow.known:
            raise CheckSkipped(f"TensorFlow's build is unknown ({env.tensorflow.why_unknown()})")
        missing = env.built_cuda.missing
        raise CheckSkipped(missing.detail if missing is not None else "TensorFlow's build is unknown")
    cuda, cudnn = env.built_cuda, env.built_cudnn
    source = origin_text(cuda)
    if cudnn.known and origin_text(cudnn) != source:
        source += f"; cuDNN {cudnn.text} from {origin_text(cudnn)}"
    return BuiltFor(env.tensorflow.text, cuda.text, cudnn.text if cudnn.known else "", source)


def origin_text(value: ResolvedVersion) -> str:
    chosen = value.chosen
    if chosen is None:
        return "not known"
    if chosen.where and chosen.origin.name == "TESTED_BUILD":
        return f"tested build table ({chosen.where})"
    return chosen.origin.value + (f" ({chosen.where})" if chosen.where else "")
