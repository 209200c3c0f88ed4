"""Rebuild matrices/compat/keras-tensorflow.toml from PyPI's metadata of the tensorflow, tf-keras
and keras wheels: the Requires-Dist line each release declares on the other package.

For each release, pip reads the wheel's METADATA without installing it:
    pip install --dry-run --no-deps --ignore-installed --only-binary :all: \
        --python-version 3.9 --platform manylinux2014_x86_64 --target /tmp/t \
        --report OUT.json tensorflow==VERSION        (tf-keras==VERSION, keras==VERSION)
(3.11 or 3.7 where no 3.9 wheel exists; 2.21.0: 3.12, manylinux_2_27_x86_64). Give this script
the directory of those reports, named NAME-VERSION.json:

    python tools/mine_keras_tensorflow.py DIR DATE > matrices/compat/keras-tensorflow.toml
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

# which package's requirement on which: tensorflow -> keras, tf-keras -> tensorflow, keras -> tensorflow
ON = {"tensorflow": "keras", "tf-keras": "tensorflow", "keras": "tensorflow"}
TABLE = {"tensorflow": "tensorflow", "tf-keras": "tf_keras", "keras": "keras"}


def rows(directory: Path) -> list[tuple[str, str, str]]:
    found = []
    for path in directory.glob("*.json"):
        report = json.loads(path.read_text())
        for item in report["install"]:
            meta = item["metadata"]
            name = canonicalize_name(meta["name"])
            if name not in ON:
                continue
            lines = [Requirement(line) for line in meta.get("requires_dist") or []]
            wanted = [str(r.specifier) for r in lines
                      if canonicalize_name(r.name) == ON[name] and not r.marker]
            found.append((name, meta["version"], wanted[0] if wanted else ""))
    return sorted(found, key=lambda r: (r[0], Version(r[1])))


def main(directory: str, date: str) -> None:
    print("# What each release declares on the other package (Requires-Dist in the wheel's METADATA on")
    print(f"# PyPI, read {date} with tools/mine_keras_tensorflow.py). Schema: matrices/compat/README.md.")
    print("schema_version = 1")
    for name, version, spec in rows(Path(directory)):
        print(f"\n[[{TABLE[name]}]]")
        print(f'{TABLE[name]} = "{version}"')
        print(f'{ON[name]} = "{spec}"' if spec else f'{ON[name]} = ""  # declares none')
        print(f'source = "https://pypi.org/project/{name}/{version}/"')


if __name__ == "__main__":
    main(*sys.argv[1:3])
