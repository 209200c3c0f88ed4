"""Rebuild matrices/compat/tensorflow-requires.toml from PyPI's metadata of the tensorflow wheels.

For each release, pip reads the wheel's METADATA without installing it:
    pip install --dry-run --no-deps --ignore-installed --only-binary :all: \
        --python-version 3.9 --platform manylinux2014_x86_64 --target /tmp/t \
        --report OUT.json tensorflow==VERSION
(Python 3.7 for releases before 2.12, whose wheels stop there; 3.11 for releases without a
3.9 wheel). Give this script the directory of those OUT.json files, named VERSION.json:

    python tools/mine_tensorflow_requires.py DIR DATE > matrices/compat/tensorflow-requires.toml
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mgpu_doctor.model.distributions import TF_COMPANIONS  # noqa: E402


def rows(directory: Path) -> list[tuple[str, list[str], str]]:
    found = []
    for path in directory.glob("*.json"):
        report = json.loads(path.read_text())
        for item in report["install"]:
            meta = item["metadata"]
            lines = []
            for line in meta.get("requires_dist", []):
                req = Requirement(line)
                companion = req.name.lower().replace("_", "-") in TF_COMPANIONS
                if companion and "extra" not in str(req.marker or ""):
                    lines.append(str(req))
            wheel = item["download_info"]["url"].rsplit("/", 1)[-1]
            found.append((meta["version"], lines, wheel))
    return sorted(found, key=lambda r: Version(r[0]))


def main() -> int:
    directory, date = Path(sys.argv[1]), sys.argv[2]
    print("# What each tensorflow release requires of the packages it imports and pins (numpy,")
    print("# protobuf, ml-dtypes, h5py): its wheel's Requires-Dist lines without an extra.")
    print("# Made by tools/mine_tensorflow_requires.py. Schema: matrices/compat/README.md.")
    print("schema_version = 1")
    for version, lines, wheel in rows(directory):
        print()
        print("[[release]]")
        print(f'tensorflow = "{version}"')
        print("requires = [")
        for line in lines:
            print(f"  {json.dumps(line)},")
        print("]")
        print(f'source = "https://pypi.org/project/tensorflow/{version}/"')
        print(f'note = "Requires-Dist of {wheel}, read with pip install --dry-run --report on {date}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
