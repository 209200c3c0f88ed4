"""The diagnosed interpreter and the distributions on its path, as plain data.

Python 3.6+, standard library only, no side effects when imported: `packages_probe.py` runs it in
a child of the diagnosed Python; for the doctor's own Python, `mgpu_doctor/probes/packages.py`
loads this file and runs it in-process (the same facts, without starting a Python).
"""

import os
import platform
import re
import site
import sys


WANTED = {
    "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos",
    "tf-nightly", "tf-nightly-cpu", "tf-nightly-gpu", "keras", "keras-nightly", "tf-keras",
    "tf-keras-nightly", "jax", "jaxlib", "torch", "numpy", "protobuf", "h5py", "ml-dtypes",
    "tensorboard", "nvidia-ml-py", "pynvml", "horovod", "ray", "tensorrt",
}
REQUIRES_OF = {"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tf-keras"}


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def wanted(name):
    return name in WANTED or name.startswith("nvidia-")


DIST_DIR = re.compile(r"^(?P<name>.+?)-(?P<version>[^-]+?)\.(?:dist-info|egg-info)$")


def distributions(path):
    """(name, version, metadata_dir, location) of installed distributions, in ``path``'s order.

    Reads directory names (name-version.dist-info) instead of parsing every METADATA file:
    importlib.metadata does the latter and costs ~100 ms in a TensorFlow environment.
    """
    seen_dirs = set()
    for entry in path:
        location = os.path.abspath(entry or ".")
        if location in seen_dirs or not os.path.isdir(location):
            continue
        seen_dirs.add(location)
        try:
            names = os.listdir(location)
        except OSError:
            continue
        for item in sorted(names):
            match = DIST_DIR.match(item)
            if match:
                yield match.group("name"), match.group("version"), os.path.join(location, item), location
            elif item.endswith(".egg-info"):  # develop installs: name.egg-info, version inside
                path = os.path.join(location, item)
                version = header(path, "Version")
                if version:
                    yield item[: -len(".egg-info")], version, path, location


def header(path, field):
    """A field of a distribution's METADATA / PKG-INFO (the email-style header part)."""
    for name in ("METADATA", "PKG-INFO"):
        meta = os.path.join(path, name) if os.path.isdir(path) else path
        try:
            with open(meta, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    if line.startswith(field + ":"):
                        return line.split(":", 1)[1].strip()
        except (IOError, OSError):
            continue
    return ""


def requires_of(path):
    lines = []
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(path, name), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    if line.startswith("Requires-Dist:"):
                        lines.append(line.split(":", 1)[1].strip())
            return lines
        except (IOError, OSError):
            continue
    return lines


def libc():
    # platform.libc_ver() reads the whole interpreter binary (~100 ms); confstr is instant.
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        value = None
    return value or " ".join(platform.libc_ver()).strip()


def facts(path):
    """What `packages_probe.py` writes: the interpreter, its libc, and the wanted distributions
    found on ``path`` (the directories of ``sys.path``, in order)."""
    try:
        site_packages = list(site.getsitepackages())
    except AttributeError:  # old virtualenv's site.py
        site_packages = []
    user_site = getattr(site, "USER_SITE", None)
    if user_site and site.ENABLE_USER_SITE and os.path.isdir(user_site):
        site_packages.append(user_site)
    versions, locations, requires, shadowed = {}, {}, {}, {}
    for name, version, meta_dir, location in distributions(path):
        key = canonical(name)
        if not wanted(key):
            continue
        if key in versions:
            if versions[key] != version:
                shadowed.setdefault(key, []).append(version + " at " + location)
            continue
        versions[key] = version
        locations[key] = location
        if key in REQUIRES_OF:
            requires[key] = requires_of(meta_dir)
    return {
        "python": {
            "version": platform.python_version(),
            "executable": sys.executable,
            "implementation": platform.python_implementation(),
            "prefix": sys.prefix,
            "site_packages": site_packages,
        },
        "libc": libc(),
        "versions": versions,
        "locations": locations,
        "requires": requires,
        "shadowed": shadowed,
    }
