"""What may leave the process, and masked how: the environment allow-list and credential masking.

Shared by the probes (which mask what they gather, even with ``--no-redact``) and by redaction
(which masks again what a snapshot written elsewhere carries); it depends on neither.
"""

from __future__ import annotations

import re

MASK = "***"
_HEX = "0-9a-fA-F"
UUID_RE = re.compile(rf"\b(GPU|MIG)-[{_HEX}]{{8}}[{_HEX}-]*")
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")
# user:password@host without a URL scheme: a TF_CONFIG address, an scp-style XLA_FLAGS path,
# user@corp:password@host. The password runs to the last '@' before the host; host:port, e-mail
# addresses (no ':' before the '@') and image digests (name:tag@sha256:...) are left alone.
_BARE_USERINFO = re.compile(
    r"(?<![\w.%+~-])[\w.%+~-]+(?:@[\w.%+~-]+)*:[^\s/\"'\\<>,;`|]+@(?=[\w\[])(?!sha\d+:)"
)
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|(^|_)(API_?)?KEYS?(_|$)",
    re.IGNORECASE,
)
_KEY_VALUE = re.compile(
    r"(?i)\b((?:api[_-]?|access[_-]?|secret[_-]?|private[_-]?)?(?:password|passwd|pwd|token|secret|key|auth))"
    r"(\s*[=:]\s*)(?!=)([^\s,;&'\"]+)"
)
_TOKEN_PATTERNS = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
# A long mixed-case alphanumeric run with digits: how generated secrets look, unlike paths,
# versions, flags or (lower-case hex) UUIDs and hashes.
_HIGH_ENTROPY = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{32,}(?![A-Za-z0-9+/=_-])")

ALLOWED_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT",
    "CUDNN_PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "XLA_FLAGS", "KERAS_BACKEND",
    "KERAS_HOME", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "VIRTUAL_ENV", "PYTHONPATH",
    "OMP_NUM_THREADS", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_CACHE_PATH", "CUDA_CACHE_DISABLE",
    "CUDA_FORCE_PTX_JIT", "SLURM_JOB_ID", "SLURM_NODEID", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_GPUS_ON_NODE", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "OMPI_COMM_WORLD_RANK",
    "HOROVOD_GPU_OPERATIONS",
})
ALLOWED_PREFIXES = ("TF_", "NCCL_", "XLA_", "KERAS_", "MGPU_DOCTOR_")


def is_allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def mask_credentials(text: str) -> str:
    """Credential-looking parts of a string masked: user:password@ (with or without a URL scheme),
    known token formats, bearer/basic credentials, key=value."""
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _BARE_USERINFO.sub(f"{MASK}@", text)
    text = _TOKEN_PATTERNS.sub(MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _KEY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def mask_env_value(name: str, value: str) -> str:
    if value and _SECRET_NAME.search(name):
        return MASK
    value = mask_credentials(value)
    return _HIGH_ENTROPY.sub(lambda m: MASK if _looks_generated(m.group(0)) else m.group(0), value)


def _looks_generated(word: str) -> bool:
    if UUID_RE.match(word):  # GPU/MIG UUIDs are hashed, not masked: CUDA_VISIBLE_DEVICES needs them
        return False
    return (any(c.isdigit() for c in word) and any(c.islower() for c in word)
            and any(c.isupper() for c in word))
