"""What may leave the process, and masked how: the environment allow-list and credential masking.

Shared by the probes (which mask what they gather, even with ``--no-redact``) and by redaction
(which masks again what a snapshot written elsewhere carries); it depends on neither.
"""

from __future__ import annotations

import functools
import re

MASK = "***"
_HEX = "0-9a-fA-F"
UUID_RE = re.compile(rf"\b(GPU|MIG)-[{_HEX}]{{8}}[{_HEX}-]*")
# Every pattern runs in time linear in the text, whatever the text (a snapshot from a stranger, a
# 1 MiB environment value): no pattern may try a long run again from each position inside it.
#
# The patterns that look for a credential are compiled on first use (a cached function each):
# they run only on a text that holds what one of them needs (_TRIGGERS), which no string of a
# healthy quick check does; compiling them was 2.5 ms of every run.
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|(^|_)(API_?)?KEYS?(_|$)",
    re.IGNORECASE,
)
# A long mixed-case alphanumeric run with digits: how generated secrets look, unlike paths,
# versions, flags or (lower-case hex) UUIDs and hashes.
_HIGH_ENTROPY = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{32,}(?![A-Za-z0-9+/=_-])")
# What every pattern below needs somewhere in the text: most strings (a GPU name, a PCI bus id, a
# version, "9 passed") have none of it and are returned after one search. (A password is named
# password, passwd or passphrase wherever a pattern finds one: "passw" and "passp".)
_TRIGGERS = re.compile("passw|passp|pwd|token|secret|key|auth|bearer|basic|gh[pousr]_|github_pat_|glpat-"
                       "|hf_|sk-|akia|xox|eyj|credential|hooks.slack|discord|anaconda.org/t/")


@functools.cache
def _url_userinfo() -> re.Pattern[str]:
    """The userinfo of a URL; its scheme is looked for behind each "://" only (a bounded look back)."""
    return re.compile(r"(?<=[A-Za-z0-9+.-])://[^/\s@]+@")


@functools.cache
def _scheme_tail() -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*\Z")  # starts once per run: linear


_SCHEME_LOOK_BACK = 32


# user:password@host without a URL scheme: a TF_CONFIG address, an scp-style XLA_FLAGS path,
# user@corp:password@host. The password runs to the last '@' before the host; host:port, e-mail
# addresses (no ':' before the '@') and image digests (name:tag@sha256:...) are left alone.
# Found by a scan of each run of characters a password may hold: the user part starts where no
# user part goes on (one start per user@corp chain), the password ends at the run's last '@'
# before a host.
@functools.cache
def _userinfo_run() -> re.Pattern[str]:
    return re.compile(r"[^\s/\"'\\<>,;`|]+")


@functools.cache
def _user_then_colon() -> re.Pattern[str]:
    return re.compile(r"(?<![\w.%+~-])(?<![\w.%+~-]@)[\w.%+~-]+(?:@[\w.%+~-]+)*:")


@functools.cache
def _host_at() -> re.Pattern[str]:
    return re.compile(r"@(?=[\w\[])(?!sha\d+:)")


# A PEM block (a private key, a certificate) from BEGIN to END, whatever lies between (line breaks,
# escaped "\\n", a short last line); a block without its END is masked to the end of the text.
@functools.cache
def _pem_begin() -> re.Pattern[str]:
    return re.compile(r"-----BEGIN [A-Z0-9 ]{1,64}-----")


@functools.cache
def _pem_end() -> re.Pattern[str]:
    return re.compile(r"-----END [A-Z0-9 ]{1,64}-----")


@functools.cache
def _key_value() -> re.Pattern[str]:
    return re.compile(
        r"(?i)\b((?:api[_-]?|access[_-]?|secret[_-]?|private[_-]?)?(?:password|passwd|pwd|token|secret|key|auth))"
        r"(\s*[=:]\s*)(?!=)([^\s,;&'\"]+)"
    )


@functools.cache
def _token_patterns() -> re.Pattern[str]:
    return re.compile(
        r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
        r"|hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,})"
    )


# A JSON Web Token (eyJ<header>.<payload>.<signature>): found in runs of dotted words, so a long
# run of "eyJ-eyJ-..." is read once, not once per "eyJ".
@functools.cache
def _dotted_words() -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)+")


@functools.cache
def _bearer() -> re.Pattern[str]:
    return re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


# NAME=value or NAME: value where the name says it holds a secret wherever in the name it says so
# (aws_secret_access_key, WANDB_API_KEY, db.password, HF_TOKEN); the name is read whole, bounded.
@functools.cache
def _assignment() -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9_.-])([A-Za-z][A-Za-z0-9_.-]{0,79})\s{0,4}[=:]\s{0,4}(?!=)")


@functools.cache
def _assigned_value() -> re.Pattern[str]:
    return re.compile(r"\"[^\"\s]{1,400}\"|'[^'\s]{1,400}'|[^\s,;&'\"]{1,400}")


@functools.cache
def _secret_in_name() -> re.Pattern[str]:
    return re.compile(r"(?i)token|secret|password|passwd|passphrase|credential"
                      r"|(^|[_.-])(api[_.-]?|access[_.-]?|private[_.-]?|auth[_.-]?)?keys?($|[_.-])")


# Webhook and channel URLs whose path is the credential: Slack, Discord, a conda token channel.
@functools.cache
def _secret_url() -> re.Pattern[str]:
    return re.compile(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]{1,200}"
                      r"|(discord(?:app)?\.com/api/webhooks/)[A-Za-z0-9/_.-]{1,200}"
                      r"|(conda\.anaconda\.org/t/)[A-Za-z0-9_.-]{1,200}")


def _maybe_secret(text: str) -> bool:
    return "@" in text or "-----BEGIN " in text or _TRIGGERS.search(text.lower()) is not None


ALLOWED_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT",
    "CUDNN_PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "XLA_FLAGS", "KERAS_BACKEND", "JAX_PLATFORMS",
    "KERAS_HOME", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "VIRTUAL_ENV", "PYTHONPATH",
    "OMP_NUM_THREADS", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_CACHE_PATH", "CUDA_CACHE_DISABLE",
    "CUDA_FORCE_PTX_JIT", "SLURM_JOB_ID", "SLURM_NODEID", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_GPUS_ON_NODE", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "OMPI_COMM_WORLD_RANK",
    "HOROVOD_GPU_OPERATIONS", "NVIDIA_TENSORFLOW_VERSION", "TF2_BEHAVIOR",
})
ALLOWED_PREFIXES = ("TF_", "NCCL_", "XLA_", "KERAS_", "MGPU_DOCTOR_")


def is_allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def mask_credentials(text: str) -> str:
    """Credential-looking parts of a string masked: PEM blocks, user:password@ (with or without a
    URL scheme), known token formats, bearer/basic credentials, key=value. Linear in the text."""
    if not _maybe_secret(text):
        return text
    text = _mask_pem_blocks(text)
    text = _mask_url_userinfo(text)
    text = _userinfo_run().sub(_mask_bare_userinfo, text)
    text = _token_patterns().sub(MASK, text)
    text = _dotted_words().sub(_mask_jwts, text)
    text = _bearer().sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _secret_url().sub(lambda m: f"{m.group(1) or m.group(2) or m.group(3)}{MASK}", text)
    text = _mask_assignments(text)
    return _key_value().sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def _mask_assignments(text: str) -> str:
    """The value after each secret-named ``NAME=`` / ``NAME:``; the names are found without taking
    the values, so ``TF_X=aws_secret_access_key=...`` finds the inner one too."""
    parts, pos = [], 0
    for match in _assignment().finditer(text):
        if match.start() < pos or _secret_in_name().search(match.group(1)) is None:
            continue
        value = _assigned_value().match(text, match.end())
        if value is None or value.group(0).strip("\"'") == MASK:
            continue
        quote = value.group(0)[0] if value.group(0)[0] in "\"'" else ""
        parts += [text[pos:match.end()], quote, MASK, quote]
        pos = value.end()
    return "".join(parts) + text[pos:] if parts else text


def _mask_pem_blocks(text: str) -> str:
    if "-----BEGIN " not in text:
        return text
    parts, pos = [], 0
    while (begin := _pem_begin().search(text, pos)) is not None:
        end = _pem_end().search(text, begin.end())
        parts += [text[pos:begin.start()], begin.group(0), MASK, end.group(0) if end else ""]
        pos = end.end() if end else len(text)
    return "".join(parts) + text[pos:]


def _mask_url_userinfo(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        before = text[max(0, match.start() - _SCHEME_LOOK_BACK):match.start()]
        return f"://{MASK}@" if _scheme_tail().search(before) else match.group(0)
    return _url_userinfo().sub(one, text)


def _mask_bare_userinfo(run: re.Match[str]) -> str:
    text = run.group(0)
    if ":" not in text or "@" not in text:
        return text
    last_at = -1
    for last_at_match in _host_at().finditer(text):
        last_at = last_at_match.start()
    user = _user_then_colon().search(text)
    # The password is at least one character; a later user part ends later still.
    if user is None or last_at < user.end() + 1:
        return text
    return f"{text[:user.start()]}{MASK}@{text[last_at + 1:]}"


def _mask_jwts(run: re.Match[str]) -> str:
    words = run.group(0).split(".")
    if not any("eyJ" in w for w in words):
        return run.group(0)
    out, i = [], 0
    while i < len(words):
        word = words[i]
        start = 0 if word.startswith("eyJ") else word.find("-eyJ") + 1 or -1
        if (start >= 0 and len(word) - start >= 11 and i + 2 < len(words)
                and len(words[i + 1]) >= 8):
            out.append(word[:start] + MASK)
            i += 3
        else:
            out.append(word)
            i += 1
    return ".".join(out)


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
