"""Real TensorFlow environments from 1.15 to 2.21, one virtual environment each, installed once into
a cache (tests/test_tf_versions.py diagnoses them with `check --python`).

Each environment holds only that TensorFlow (``tensorflow-cpu`` where it exists, ``tensorflow`` for
1.15) and the pins a fresh install needs to import at all, each with its reason. It is created with
the newest interpreter of this machine that the release supports, ``pip install``-ed into
``MGPU_DOCTOR_TEST_CACHE`` (default ``.cache/`` in the repository) ``/tf-envs/<name>-<digest>/``,
with pip's cache beside it (``/tf-envs/pip/``, where the index lets pip cache): a second run
reuses the environment, which a marker file (``.complete``) says was installed whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from mgpu_doctor.smoke.layers import SMOKE_LAYERS, layer_names, variants
from mgpu_doctor.smoke.support import SUPPORT, Release, row
from tests.pip_install import pip_install

REPO = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT_S = 1200
PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"

# protobuf 4 (what pip picks for these on their Pythons) cannot be imported by TensorFlow built
# against protobuf 3 ("Descriptors cannot be created directly"): every such user pins it.
OLD_PROTOBUF = ("protobuf<3.20", "protobuf 4 breaks `import tensorflow` before 2.9")


@dataclass(frozen=True)
class TfEnv:
    """One TensorFlow release as a user installs it: ``pip install <requirements>`` on ``python``."""

    name: str  # "2.15": how the tests and the docs call it
    python: str  # "3.11": the interpreter's major.minor
    requirements: tuple[str, ...]
    pins: tuple[tuple[str, str], ...] = ()  # (requirement, why a fresh install needs it)
    env: tuple[tuple[str, str], ...] = ()  # environment variables the user sets for it
    # what the smoke trains on it: "standard" (the whole level) or the layers of a reduced run
    layers: tuple[str, ...] = ()

    @property
    def all_requirements(self) -> tuple[str, ...]:
        return self.requirements + tuple(pin for pin, _ in self.pins)

    @property
    def environ(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Installed:
    """An environment ready to diagnose: its interpreter, and how long its install took."""

    env: TfEnv
    python: Path
    install_seconds: float
    cached: bool
    versions: dict[str, str] = field(default_factory=dict)


class EnvUnavailable(Exception):
    """No interpreter for the release on this machine, or no package index to install from."""


def interpreter(minor: str) -> Path | None:
    """The machine's ``python<minor>``: the newest pyenv build of it, else the one on PATH (a
    pyenv shim there answers only for the selected versions: each candidate must run)."""
    builds = sorted(PYENV.glob(f"{minor}.*/bin/python{minor}"),
                    key=lambda p: tuple(int(n) for n in p.parents[1].name.split(".") if n.isdigit()))
    on_path = shutil.which(f"python{minor}")
    for candidate in [*reversed(builds), *([Path(on_path)] if on_path else [])]:
        try:
            if subprocess.run([str(candidate), "-c", "import sys"], capture_output=True,
                              timeout=60).returncode == 0:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


def cache_dir() -> Path:
    return Path(os.environ.get("MGPU_DOCTOR_TEST_CACHE", REPO / ".cache")) / "tf-envs"


def installed(env: TfEnv) -> Installed:
    """The environment of ``env``, creating it first when it is not cached."""
    base = interpreter(env.python)
    if base is None:
        raise EnvUnavailable(f"no Python {env.python} on this machine (PATH, {PYENV})")
    digest = hashlib.sha256("\n".join((str(base), *env.all_requirements)).encode()).hexdigest()[:10]
    target = cache_dir() / f"tf-{env.name}-{digest}"
    python = target / "bin" / "python"
    done = target / ".complete"
    if done.exists():
        data = json.loads(done.read_text())
        return Installed(env, python, data["install_seconds"], True, data.get("versions", {}))
    # A venv cannot move (its scripts name their path): it is built where it stays, and only the
    # marker file says it is complete.
    shutil.rmtree(target, ignore_errors=True)
    try:
        subprocess.run([str(base), "-m", "venv", str(target)], check=True, capture_output=True,
                       text=True, timeout=300)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise EnvUnavailable(f"python{env.python} -m venv failed: {str(exc.stderr or exc).strip()[-500:]}") from exc
    # --no-compile: byte-compiling all of TensorFlow costs minutes of CPU; the import compiles what it uses
    seconds = pip_install(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile",
         "--cache-dir", str(cache_dir() / "pip"), *env.all_requirements],
        env.all_requirements, target, EnvUnavailable, INSTALL_TIMEOUT_S)
    versions = pip_versions(python)
    done.write_text(json.dumps({"requirements": env.all_requirements, "install_seconds": seconds,
                                "versions": versions}) + "\n")
    return Installed(env, python, seconds, False, versions)


_STARTED: dict[str, Future[Installed]] = {}
_POOL: list[ThreadPoolExecutor] = []
PARALLEL_INSTALLS = 3  # pip downloads while earlier environments are diagnosed


def installed_soon(env: TfEnv, every: tuple[TfEnv, ...]) -> Installed:
    """``installed(env)``, with the installs of ``every`` environment started at the first call,
    a few at a time in threads: the downloads overlap with the trainings of the tests."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(PARALLEL_INSTALLS, thread_name_prefix="tf-env"))
        for each in every:
            _STARTED[each.name] = _POOL[0].submit(installed, each)
    future = _STARTED.get(env.name) or _POOL[0].submit(installed, env)
    return future.result()


def pip_versions(python: Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                         capture_output=True, text=True, timeout=120)
    try:  # "tensorflow_cpu" (newer wheels' METADATA) is "tensorflow-cpu"
        return {canonicalize_name(p["name"]): p["version"] for p in json.loads(out.stdout)}
    except (ValueError, KeyError, TypeError):
        return {}


# The smoke's reduced run on the releases between the two it trains at the whole standard level:
# a layer for each thing the releases spell differently (the recurrent kernel's arguments,
# synchronized BatchNormalization, MultiHeadAttention); dense too (its checkpoint round trip)
# where the checkpoint formats change: the first eager Keras 2, the first `.keras`, Keras 3.
REDUCED = ("gru", "batchnorm", "attention")
FORMATS = ("dense", *REDUCED)
STANDARD = ()  # every layer

ENVS = (
    TfEnv("1.15", "3.7", ("tensorflow==1.15.5",), pins=(OLD_PROTOBUF,), layers=STANDARD),
    TfEnv("2.4", "3.8", ("tensorflow-cpu==2.4.4",), pins=(OLD_PROTOBUF,), layers=FORMATS),
    TfEnv("2.8", "3.8", ("tensorflow-cpu==2.8.4",), pins=(OLD_PROTOBUF,), layers=REDUCED),
    TfEnv("2.12", "3.10", ("tensorflow-cpu==2.12.1",), layers=FORMATS),
    TfEnv("2.15", "3.11", ("tensorflow-cpu==2.15.1",), layers=STANDARD),
    TfEnv("2.16", "3.12", ("tensorflow-cpu==2.16.2",), layers=FORMATS),
    TfEnv("2.18", "3.12", ("tensorflow-cpu==2.18.1",), layers=REDUCED),
    TfEnv("2.21", "3.12", ("tensorflow-cpu==2.21.0",), layers=REDUCED),
    # tf-keras requires `tensorflow`: beside tensorflow-cpu pip would install both (two copies of
    # TensorFlow in one environment, which the doctor rightly warns about)
    TfEnv("2.21-tf-keras", "3.12", ("tensorflow==2.21.0", "tf-keras==2.21.0"),
          env=(("TF_USE_LEGACY_KERAS", "1"),), layers=REDUCED),
)




# Where the multi-worker smoke (two workers, dense) runs too: TensorFlow 1 and the last Keras 2.
MULTI_WORKER = ("1.15", "2.15")

def release(env: TfEnv) -> Release:
    """The release ``env`` installs, as the docs' support table names it, with the rows
    tests/test_tf_versions.py runs on it (`check --python` at the standard level on its layers)."""
    layers = env.layers or layer_names()
    covered = {("probes",)} | {row(("smoke", layer, variant)).key for layer in layers for variant in variants(layer)
                               if variant != "cudnn"}  # planned on GPUs only at the standard level
    if any(SMOKE_LAYERS[layer].empty_replica_sensitive for layer in layers):
        covered.add(("scenario", "uneven_final_batch"))
    if env.name in MULTI_WORKER:
        covered.add(("multiworker",))
    if "dense" in layers:  # the standard level's checkpoint round trip
        covered |= {s.key for s in SUPPORT if s.key[0] == "checkpoint"}
    return Release.of(env.name.split("-")[0], tf_keras="tf-keras" in env.name, covered=frozenset(covered))


TESTED = tuple(release(e) for e in ENVS)  # the columns of the docs' support table


if __name__ == "__main__":  # warm the cache: python -m tests.tf_envs
    for each in ENVS:
        try:
            got = installed(each)
            print(f"{each.name}: {got.python} ({'cached' if got.cached else f'{got.install_seconds} s'})", flush=True)
        except EnvUnavailable as exc:
            print(f"{each.name}: unavailable: {exc}", flush=True)
