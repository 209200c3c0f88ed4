"""The JSON report (schema: mgpu_doctor/schemas/report.schema.json)."""

from __future__ import annotations

import json

from mgpu_doctor.model.findings import condition_groups
from mgpu_doctor.model.report import Report
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.renderers import RenderOptions
from mgpu_doctor.renderers.common import exit_code_for, summary_counts


def render(report: Report, options: RenderOptions) -> str:
    data = to_jsonable(report)
    data["summary"] = {
        "worst": report.worst.value,
        "gate_worst": report.gate_worst.value,
        "fail_on": options.fail_on.value,
        "exit_code": exit_code_for(report, options.fail_on),
        "acknowledged": len(report.acknowledged),
        "checks": summary_counts(report),
    }
    if report.training is not None:
        data["training"]["unknown"] = list(report.training.unknown())
    # The conditional findings by the fact that would decide them (each finding's `condition`).
    data["conditional"] = [
        {**to_jsonable(g.condition), "codes": [f.code for f in g.findings]}
        for g in condition_groups(report.findings)
    ]
    if report.fleet is not None:
        data["differences"] = [to_jsonable(r) for r in report.fleet.differences]
    return json.dumps(data, indent=2) + "\n"
