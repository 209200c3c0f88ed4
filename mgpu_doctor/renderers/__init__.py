"""Reporters turn the one Report object into text. Only `human` knows about glyphs and colour.

May import: errors, record, model.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.report import Report
from mgpu_doctor.record import record


@record
class RenderOptions:
    fail_on: Severity = Severity.ERROR
    verbose: bool = False
    color: bool = False
    unicode: bool = True


class OutputFormat(str, enum.Enum):
    HUMAN = "human"
    JSON = "json"
    MARKDOWN = "markdown"
    HTML = "html"

    def renderer(self) -> Callable[[Report, RenderOptions], str]:
        if self is OutputFormat.HUMAN:
            from mgpu_doctor.renderers.human import render
        elif self is OutputFormat.JSON:
            from mgpu_doctor.renderers.json_report import render
        elif self is OutputFormat.MARKDOWN:
            from mgpu_doctor.renderers.markdown import render
        else:
            from mgpu_doctor.renderers.html_report import render
        return render
