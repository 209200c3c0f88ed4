"""An entry's range read as OSV reads one: past the last report with no fix known is "cannot tell",
named on its own in the next series and counted in one line further on; a fix closes the range."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.matrix.environment import parse_query
from mgpu_doctor.matrix.known_issue_findings import SHOWN_UNDECIDED, older_lines
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.match import assess
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.matrix.ranges import Place, reading
from mgpu_doctor.matrix.review import names_version, reviews
from mgpu_doctor.model.versions import parse_version

MATRIX = load_matrix(bundled_matrix_dir())
# distribution-hangs.toml: tensorflow >=2.13,<2.15.dev0 (the 2.13 and 2.14 series), no fix known
GATHER_HANG = "tf-62065-mirrored-gather-hang-tf213-214"
# keras >=3.0,<3.9.0rc0, fixed in Keras 3.9.0
FIXED_IN_KERAS_39 = "keras-20134-fit-rejects-distribute-datasets-from-function"


def query(capsys, *terms: str) -> dict[str, dict]:
    assert main(["matrix", "query", *terms, "--format", "json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    return {f["code"]: f for c in data["checks"] for f in c["findings"]}


@pytest.mark.parametrize(("text", "fixed", "version", "place"), [
    (">=2.13,<2.15.dev0", False, "2.14.1", Place.IN),
    (">=2.13,<2.15.dev0", False, "2.12.0", Place.OUT),  # before it was introduced
    (">=2.13,<2.15.dev0", False, "2.15.1", Place.NEXT_SERIES),
    (">=2.13,<2.15.dev0", False, "2.15.0rc1", Place.NEXT_SERIES),
    (">=2.13,<2.15.dev0", False, "2.16.0", Place.OLDER_REPORT),
    (">=2.13,<2.15.dev0", False, "3.0.0", Place.OLDER_REPORT),  # a new major is never "next"
    (">=2.13,<2.15.dev0", False, "2.15", Place.NEXT_SERIES),  # every 2.15.x is past it
    (">=2.13,<2.15.dev0", False, "2", Place.UNKNOWN),  # some 2.x inside, some past
    (">=2.11,<=2.15.1", False, "2.15.2", Place.NEXT_SERIES),  # the rest of the last series too
    (">=2.11,<=2.15.1", False, "2.16.1", Place.NEXT_SERIES),
    (">=2.11,<=2.15.1", True, "2.16.1", Place.OUT),  # a fix (or a closed range): outside
    ("==2.10.*", False, "2.11.0", Place.NEXT_SERIES),
    (">=2.4", False, "2.21.0", Place.IN),  # no upper bound
])
def test_a_tensorflow_range_reads_as_osv_reads_it(text, fixed, version, place) -> None:
    assert reading("tensorflow", text, fixed).place(version) is place


def test_a_compatibility_limit_stays_a_plain_bound() -> None:
    # cuDNN, CUDA and the driver bound what a build can load: past them is outside, not "no fix known"
    assert reading("cudnn", ">=8.0,<=8.1.1", fixed=False).place("8.6.0") is Place.OUT
    assert reading("nccl", "==2.23.4", fixed=False).place("2.24.3") is Place.NEXT_SERIES


def test_a_version_just_past_the_last_report_is_cannot_tell_reported_up_to(capsys) -> None:
    assert MATRIX.get(GATHER_HANG).affects == {"tensorflow": ">=2.13,<2.15.dev0"}
    found = query(capsys, "tensorflow==2.15.1", "gpus=2", "strategy=mirrored", "usage=custom_training_loop")
    finding = found[f"known-issue.{GATHER_HANG}"]
    assert finding["severity"] == "info" and finding["title"].startswith("Cannot tell whether this known issue")
    assert "not known: tensorflow 2.15.1: reported up to 2.14.x, no fix known" in finding["evidence"]
    assert GATHER_HANG not in " ".join(found.get("matrix.reported-older", {}).get("evidence", []))
    # inside the reported range it is a warning, as before
    inside = query(capsys, "tensorflow==2.14.1", "gpus=2", "strategy=mirrored", "usage=custom_training_loop")
    assert inside[f"known-issue.{GATHER_HANG}"]["severity"] == "warning"


def test_a_version_far_past_the_last_report_is_counted_in_one_line(capsys) -> None:
    found = query(capsys, "tensorflow==2.21.0", "gpus=2", "strategy=mirrored", "usage=custom_training_loop")
    assert f"known-issue.{GATHER_HANG}" not in found
    older = found["matrix.reported-older"]
    assert older["severity"] == "info"
    assert older["title"].endswith("known issue(s) were last reported on older releases, with no fix known")
    # the most recently reported named, the rest counted: naming thousands would cost every run
    count = int(older["title"].split()[0])
    assert count > SHOWN_UNDECIDED and len(older["evidence"]) == SHOWN_UNDECIDED + 1
    assert older["evidence"][-1] == f"... and {count - SHOWN_UNDECIDED} more, reported on older releases still"
    reported = [e.rpartition(" reported up to ")[2] for e in older["evidence"][:-1]]
    releases = [(parse_version(r.removesuffix(".x")).release + (0, 0))[:3] for r in reported]  # type: ignore[union-attr]
    assert reported[0].startswith("2.19") and releases == sorted(releases, reverse=True), reported
    # the whole list, most recent report first: an entry of 2.14 before one of the 1.x era
    env, _ = parse_query(["tensorflow==2.21.0", "gpus=2", "strategy=mirrored"])
    ids = [line.split(":")[0] for line in older_lines([assess(i, env) for i in MATRIX.issues])]
    tf1 = next(i.id for i in MATRIX.issues if i.id in ids and i.reading("tensorflow").last_reported.startswith("1."))
    assert ids.index(GATHER_HANG) < ids.index(tf1)


def test_a_fixed_entry_is_never_no_fix_known(capsys) -> None:
    entry = MATRIX.get(FIXED_IN_KERAS_39)
    assert entry.fixed_in and entry.affects["keras"] == ">=3.0,<3.9.0rc0"
    found = query(capsys, "keras==3.10.0", "tensorflow==2.19.0", "gpus=2")
    assert f"known-issue.{FIXED_IN_KERAS_39}" not in found
    assert FIXED_IN_KERAS_39 not in " ".join(found.get("matrix.reported-older", {}).get("evidence", []))


def test_an_old_tensorflow_query_is_not_flooded(capsys) -> None:
    """TensorFlow 2.21 against a matrix mostly of older reports: one line counts them."""
    main(["matrix", "query", "tensorflow==2.21.0", "gpus=2"])
    out = capsys.readouterr().out
    assert sum("reported up to" in line for line in out.splitlines()) == 0  # named only with -v
    assert len(out.splitlines()) <= 26, out


# --- replaces: the ids of entries merged into one ------------------------------------------------

def test_validate_refuses_a_replaced_id_that_is_still_an_entry_or_replaced_twice(tmp_path) -> None:
    from tests.test_matrix import entry, problems_of

    def merged(new_id: str, url: str, replaces: str) -> str:
        return entry(id=new_id, url=url).replace('affects = {', f'replaces = [{replaces}]\naffects = {{', 1)

    one = merged("survivor", "https://github.com/tensorflow/tensorflow/issues/7", '"gone"')
    assert problems_of(tmp_path, one) == []
    still = problems_of(tmp_path, one, entry(id="gone", url="https://github.com/tensorflow/tensorflow/issues/8"))
    assert len(still) == 1 and "[survivor] replaces[0]: 'gone' is still an entry" in still[0]
    twice = problems_of(tmp_path, one, merged("other", "https://github.com/tensorflow/tensorflow/issues/9",
                                              '"gone"'))
    assert len(twice) == 1 and "[other] replaces[0]: 'gone' is replaced by 'survivor' too" in twice[0]


# --- a union of ranges: one cause reported on several series -------------------------------------

@pytest.mark.parametrize(("version", "place"), [
    ("2.4.1", Place.IN), ("2.9.3", Place.IN),
    ("2.6.0", Place.BETWEEN),  # between the two reports: neither a match nor outside
    ("2.3.0", Place.OUT),
    ("2.10.0", Place.NEXT_SERIES),  # past the last one, no fix known
    ("2.6", Place.BETWEEN),  # every 2.6.x lies between
])
def test_a_version_between_two_reported_ranges_is_between(version, place) -> None:
    union = reading("tensorflow", ">=2.4.0,<=2.4.1 || ==2.9.*", fixed=False)
    assert union.place(version) is place
    assert union.shown() == "2.4.0-2.4.1 and 2.9.x"


def test_a_list_of_ranges_is_oldest_first_and_disjoint(tmp_path) -> None:
    from tests.test_matrix import entry, problems_of

    def with_ranges(ranges: str) -> str:
        return entry().replace('affects = { tensorflow = ">=2.10,<=2.10.0" }', f"affects = {{ tensorflow = {ranges} }}")

    assert problems_of(tmp_path, with_ranges('[">=2.10,<=2.10.0", "==2.12.*"]')) == []
    for bad in ('["==2.12.*", ">=2.10,<=2.10.0"]', '[">=2.10,<=2.12.0", "==2.12.*"]', '[">=2.10,<=2.10.0"]'):
        [problem] = problems_of(tmp_path, with_ranges(bad))
        assert "affects.tensorflow" in problem, bad


# --- merged entries: one cause, its reports on several series -------------------------------------

FIT_LOOP = "fit-new-models-in-loop-host-leak"  # leaks-tensorflow.toml: 2.11-2.15.1, 2.17.x, 2.18.x


def test_a_version_between_two_reports_of_a_real_entry_is_cannot_tell(capsys) -> None:
    assert MATRIX.get(FIT_LOOP).affects["tensorflow"] == ">=2.11,<=2.15.1 || ==2.17.* || ==2.18.*"
    found = query(capsys, "tensorflow==2.16.1", "gpus=2", "usage=fit_in_loop")
    finding = found[f"known-issue.{FIT_LOOP}"]
    assert finding["severity"] == "info" and finding["title"].startswith("Cannot tell")
    assert ("not known: tensorflow 2.16.1: reported on 2.11-2.15.1 and 2.17.x and 2.18.x, not on this series"
            in finding["evidence"])
    assert finding["condition"]["key"] == "reported"
    for inside in ("2.13.0", "2.17.1", "2.18.0"):
        assert query(capsys, f"tensorflow=={inside}", "gpus=2", "usage=fit_in_loop")[
            f"known-issue.{FIT_LOOP}"]["severity"] == "warning", inside
    assert f"known-issue.{FIT_LOOP}" not in query(capsys, "tensorflow==2.9.2", "gpus=2", "usage=fit_in_loop")
    past = query(capsys, "tensorflow==2.19.0", "gpus=2", "usage=fit_in_loop")[f"known-issue.{FIT_LOOP}"]
    assert "not known: tensorflow 2.19.0: reported up to 2.18.x, no fix known" in past["evidence"]


def test_an_acknowledgement_of_a_merged_id_holds_for_the_entry_it_became(capsys, tmp_path) -> None:
    assert MATRIX.get("tf-61791-fit-models-in-loop-leak-tf211-215") is None
    assert MATRIX.replaced["tf-61791-fit-models-in-loop-leak-tf211-215"] == FIT_LOOP
    paste = tmp_path / "issue.md"
    paste.write_text("Memory grows every time I train a new model.\n\ntensorflow==2.13.0\n")
    acks = tmp_path / "acks.toml"
    acks.write_text('[[acknowledge]]\ncode = "known-issue.tf-61791-fit-models-in-loop-leak-tf211-215"\n'
                    'reason = "the trainer restarts"\nexpires = 2999-12-31\n')
    code = main(["check", "--from", str(paste), "--usage", "fit_in_loop", "--ack", str(acks), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    [finding] = [f for c in data["checks"] for f in c["findings"] if f["code"] == f"known-issue.{FIT_LOOP}"]
    assert finding["severity"] == "warning" and finding["acknowledgement"]["reason"] == "the trainer restarts"
    assert code == 0 and data["summary"]["acknowledged"] == 1
    assert any(f"merged into '{FIT_LOOP}'" in n for n in data["notes"])
    assert not any("matches no finding" in n for n in data["notes"])


def test_matrix_show_of_a_merged_id_shows_the_entry_it_became(capsys) -> None:
    assert main(["matrix", "show", "keras-13353-thread-local-symbolic-scope-231"]) == 0
    out, err = capsys.readouterr()
    assert "keras-13353-thread-local-symbolic-scope-231 was merged into keras-23-thread-local-value-attributeerror" in err
    assert out.startswith("keras-23-thread-local-value-attributeerror: ")
    assert "replaces: keras-13338-thread-local-disable-tracking-230, keras-13353-thread-local-symbolic-scope-231" \
        in " ".join(re.sub(r"-\n\s+", "-", out).split())  # the line wraps at hyphens


# --- what `matrix validate` holds besides the hard rules: lines to review ----------------------------

REVIEWED = Path(__file__).parent / "data" / "matrix-review.txt"


def test_the_bundled_matrix_adds_no_review_line_nobody_read() -> None:
    """Every review line of the bundled matrix (GPU names, a range wider than its sources, one thread
    told twice) is on the reviewed list; a new one fails here until the entry is fixed or read."""
    reviewed = {line for line in REVIEWED.read_text().splitlines() if line and not line.startswith("#")}
    now = {f"{r.entry}: {r.rule}" for r in reviews(MATRIX.issues)}
    assert now - reviewed == set(), "new review lines: fix the entries or read them and list them"
    assert reviewed - now == set(), "lines no longer raised: remove them from tests/data/matrix-review.txt"


def test_each_review_rule_fires_on_an_entry_that_says_more_than_its_sources(tmp_path, capsys) -> None:
    from tests.test_matrix import entry

    wide = entry(id="wide", affects=">=2.10,<=2.11.0")  # the summary names 2.10.0 only
    named = entry(id="named", url="https://github.com/tensorflow/tensorflow/issues/2")
    gpu = entry(id="gpu", url="https://github.com/tensorflow/tensorflow/issues/3").replace(
        'affects = {', 'conditions = { gpu_names = ["RTX 2080 Ti"] }\naffects = {', 1).replace(
        'env = { tensorflow = "2.10.0" }', 'env = { tensorflow = "2.10.0", gpu_name = "RTX 2080 Ti" }')
    below = entry(id="below", url="https://github.com/tensorflow/tensorflow/issues/4", affects="<=2.10.0")
    twice = entry(id="twice", url="https://github.com/tensorflow/tensorflow/issues/5", extra=(
        '[[issue.sources]]\nurl = "https://github.com/tensorflow/tensorflow/issues/2"\nkind = "issue"\n'))
    whose = entry(id="whose", url="https://github.com/tensorflow/tensorflow/issues/6",
                  workaround="Set NCCL_P2P_DISABLE=1 (the reporter's fix).")
    path = tmp_path / "known-issues"
    path.mkdir()
    (path / "x.toml").write_text("schema_version = 1\n" + wide + named + gpu + below + twice + whose)
    assert main(["matrix", "validate", str(tmp_path)]) == 0  # review lines alone do not fail
    out = capsys.readouterr().out
    assert ("review: wide: unsourced-bound: tensorflow >=2.10,<=2.11.0: no title, summary or source note "
            "names 2.11.0") in out
    assert "review: gpu: gpu-names: the condition names GPUs (RTX 2080 Ti)" in out
    assert "review: below: no-lower-bound: tensorflow <=2.10.0 has no lower bound" in out
    assert "review: twice: same-thread: named cites https://github.com/tensorflow/tensorflow/issues/2 too" in out
    assert "review: whose: unattributed-workaround: the workaround does not say whose advice it is" in out
    assert "review: named:" not in out
    assert main(["matrix", "validate", "--strict", str(tmp_path)]) == 2
    capsys.readouterr()


@pytest.mark.parametrize(("text", "version", "named"), [
    ("seen on TensorFlow 2.0.0-beta1", "2.0.0b1", True), ("with tf 2.4.0-rc4", "2.4.0rc4", True),
    ("tf-nightly 2.16.0.dev20231115", "2.16.0.dev20231115", True), ("TensorFlow 1.12", "1.12.0", True),
    ("the 2.14 series", "2.14", True), ("Keras 3 on TensorFlow", "3.0", True),
    ("TensorFlow 2.12.1", "2.12", True),  # a series is named by any of its releases
    ("TensorFlow 2.3.1", "2.3.4", False), ("TensorFlow 1.12.1", "1.12.0", False), ("2.0.0b10", "2.0.0b1", False),
])
def test_a_version_is_named_as_people_write_it(text, version, named) -> None:
    assert names_version(text, version, "keras") is named
