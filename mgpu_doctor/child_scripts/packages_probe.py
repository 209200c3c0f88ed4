"""Child script: the diagnosed interpreter and the distributions installed in it.

Python 3.6+, standard library only. Prints nothing; writes JSON to $MGPU_DOCTOR_RESULT.
"""

import os
import platform
import re
import site
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

WANTED = {
    "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos",
    "tf-nightly", "tf-nightly-cpu", "tf-nightly-gpu", "keras", "keras-nightly", "tf-keras",
    "tf-keras-nightly", "jax", "jaxlib", "torch", "numpy", "protobuf", "h5py", "ml-dtypes",
    "tensorboard", "nvidia-ml-py", "pynvml", "horovod", "tensorrt",
}
REQUIRES_OF = {"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tf-keras"}


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def wanted(name):
    return name in WANTED or name.startswith("nvidia-")


def distributions():
    """(name, version, location, requires) in sys.path order: the first one is the one imported."""
    try:
        from importlib import metadata
    except ImportError:
        metadata = None
    if metadata is not None:
        for dist in metadata.distributions():
            name = dist.metadata["Name"] or ""
            location = ""
            try:
                location = str(dist.locate_file(""))
            except Exception:
                pass
            yield name, dist.version, location, list(dist.requires or [])
        return
    import pkg_resources  # Python < 3.8

    for dist in pkg_resources.working_set:
        try:
            requires = [str(r) for r in dist.requires(dist.extras)]
        except Exception:
            requires = []
        yield dist.project_name, dist.version, dist.location or "", requires


def main():
    try:
        site_packages = list(site.getsitepackages())
    except AttributeError:  # old virtualenv's site.py
        site_packages = []
    user_site = getattr(site, "USER_SITE", None)
    if user_site and site.ENABLE_USER_SITE and os.path.isdir(user_site):
        site_packages.append(user_site)
    versions, locations, requires, shadowed = {}, {}, {}, {}
    for name, version, location, reqs in distributions():
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
            requires[key] = reqs
    _mgpu_child.write_result({
        "python": {
            "version": platform.python_version(),
            "executable": sys.executable,
            "implementation": platform.python_implementation(),
            "prefix": sys.prefix,
            "site_packages": site_packages,
        },
        "libc": " ".join(platform.libc_ver()).strip(),
        "versions": versions,
        "locations": locations,
        "requires": requires,
        "shadowed": shadowed,
    })


if __name__ == "__main__":
    main()
