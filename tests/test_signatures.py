"""Known issues recognised by what the failure printed: signatures in the matrix, the evidence
lines kept from a text, and the matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from mgpu_doctor.matrix.known_issues import load_known_issue_files
from mgpu_doctor.matrix.signatures import signature_hits
from mgpu_doctor.model.evidence import LINE_CHARS, MAX_LINES, evidence_lines, keeps
from tests.test_matrix import entry, problems_of

URL = "https://github.com/tensorflow/tensorflow/issues/1"


def signature(text: str, source: str = URL, extra: str = "") -> str:
    return f'[[issue.signatures]]\ntext = "{text}"\nsource = "{source}"\n{extra}'


@pytest.mark.parametrize(("text", "source", "why"), [
    ("Segfault", URL, "literal characters"),  # too short to name a cause
    ("Attempt to convert a value … with an unsupported type", "https://github.com/x/y/issues/9",
     "the URL of one of this entry's sources"),
    ("model.fit(dataset, epochs=3, verbose=2)", URL, "not a line the doctor keeps"),
    ("x" * 250 + " error", URL, "at most 240"),
])
def test_validate_refuses_a_signature_that_cannot_name_the_cause(tmp_path: Path, text, source, why) -> None:
    found = problems_of(tmp_path, entry(extra=signature(text, source)))
    assert len(found) == 1 and why in found[0], found
    assert found[0].startswith(f"{tmp_path / 'rules.toml'} [rule-entry] signatures[0]."), found


def test_validate_accepts_a_signature_from_a_source(tmp_path: Path) -> None:
    sig = signature("ValueError: Attempt to convert a value (PerReplica:{…}) with an unsupported type")
    assert problems_of(tmp_path, entry(extra=sig)) == []
    assert problems_of(tmp_path, entry(extra=sig + "identifies = false\n")) == []
    assert "identifies" in problems_of(tmp_path, entry(extra=sig + 'identifies = "no"\n'))[0]


def loaded(tmp_path: Path, *texts: str):
    path = tmp_path / "rules.toml"
    path.write_text("schema_version = 1\n" + entry(extra="".join(signature(t) for t in texts)))
    result = load_known_issue_files([path])
    assert not result.problems, result.problems
    return result.issues


def test_a_signature_matches_its_pieces_in_order_within_one_line(tmp_path: Path) -> None:
    issues = loaded(tmp_path, "Loaded runtime CuDNN library: … but source was compiled with: …")
    lines = evidence_lines([
        "I get this:",
        "2018-08-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_dnn.cc:343] Loaded  runtime "
        "CUDNN library: 7.1.4 but source was compiled with: 7.2.1.  CuDNN library major and minor ...",
    ])
    [hit] = signature_hits(issues, lines, "pasted text")
    assert hit.line.line == 2 and hit.where == "pasted text, line 2"
    # the same pieces out of order, or split over two lines, are not the line
    assert signature_hits(issues, evidence_lines(["but source was compiled with: 7.2 Loaded runtime CuDNN "
                                                  "library: 7.1 error"]), "x") == []
    assert signature_hits(issues, evidence_lines(["Loaded runtime CuDNN library: 7.1.4 error",
                                                  "but source was compiled with: 7.2.1"]), "x") == []


def test_evidence_keeps_failure_lines_once_masked_and_cut() -> None:
    token = "ghp_" + "a1B2" * 9
    lines = ["just prose", "ValueError: boom", "ValueError: boom", '  File "train.py", line 41, in <module>',
             f"error: GITHUB_TOKEN={token} " + "x" * 400]
    kept = evidence_lines(lines)
    assert [(e.line, e.repeated) for e in kept] == [(2, 1), (4, 0), (5, 0)]
    assert token[:8] not in kept[2].text and len(kept[2].text) == LINE_CHARS
    assert keeps("NCCL WARN Call to connect returned Connection refused") and not keeps("Epoch 1/3")


def test_evidence_of_a_long_log_keeps_its_start_and_its_end() -> None:
    kept = evidence_lines([f"error {i}" for i in range(MAX_LINES * 3)])
    assert len(kept) == MAX_LINES and kept[0].line == 1 and kept[-1].line == MAX_LINES * 3
