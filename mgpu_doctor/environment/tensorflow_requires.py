"""What TensorFlow declares it needs: the ``[and-cuda]`` extra's pins and its Requires-Dist lines on
the companion packages, from the installed metadata or, for a version only named, the bundled tables."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from mgpu_doctor.matrix.compat_tables import bundled_and_cuda_table, bundled_tensorflow_requires_table
from mgpu_doctor.model.distributions import TF_COMPANIONS as COMPANIONS
from mgpu_doctor.model.versions import requirement_name

if TYPE_CHECKING:
    from packaging.requirements import Requirement
from mgpu_doctor.environment.readings import ResolvedVersion


def and_cuda_pin_lines(declared: tuple[list[str], str] | None, tensorflow: ResolvedVersion
                       ) -> tuple[tuple[str, ...], bool, str]:
    """The lines the [and-cuda] pins come from, whether they are marked, and where from: the
    installed TensorFlow's Requires-Dist (lines, where from), else the pins table's row for its
    version."""
    if declared is not None:
        lines, source = declared
        return tuple(lines), True, source
    if tensorflow.version is None:
        return (), False, ""
    row = bundled_and_cuda_table().pins_for(tensorflow.text)
    if row is None:
        return (), False, ""
    return tuple(row.requires), False, row.source


def tensorflow_requires_lines(declared: tuple[list[str], str] | None, tensorflow: ResolvedVersion
                              ) -> tuple[tuple[str, ...], str]:
    """TensorFlow's Requires-Dist lines on the companion packages (lines for one Python only stay:
    the check picks those of the diagnosed Python; extras go): the installed TensorFlow's, else
    the table's row for its version; and where they come from."""
    if declared is not None:
        lines, source = declared
    elif tensorflow.version is None:
        return (), ""
    else:
        row = bundled_tensorflow_requires_table().pins_for(tensorflow.text)
        if row is None:
            return (), ""
        lines, source = list(row.requires), row.source
    return tuple(line for line in lines if requirement_name(line) in COMPANIONS
                 and "extra" not in line.partition(";")[2]), source


@functools.cache
def and_cuda_requirements(lines: tuple[str, ...], marker: bool = True) -> tuple[Requirement, ...]:
    """The requirements of the ``and-cuda`` extra; with ``marker``, only lines marked for it."""
    from packaging.requirements import InvalidRequirement, Requirement

    pins = []
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if marker:
            if req.marker is None or "and-cuda" not in str(req.marker):
                continue
            try:
                if not req.marker.evaluate({"extra": "and-cuda"}):
                    continue
            except Exception:  # an environment marker this interpreter cannot evaluate: keep it
                pass
        pins.append(req)
    return tuple(pins)
