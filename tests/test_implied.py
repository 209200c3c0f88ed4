"""A TensorFlow version implied where none is named: by a keras or tf-keras version (their PyPI
requirements), by a container image (a tensorflow/tensorflow tag, an NGC release's notes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from mgpu_doctor.diagnose import query
from mgpu_doctor.environment.implied import NotAnImage, image_facts, implied_tensorflow
from mgpu_doctor.environment.matrix_view import environment_from_resolved
from mgpu_doctor.environment.query import resolve_query
from mgpu_doctor.environment.resolve import BuildKind, Origin, resolve
from mgpu_doctor.errors import BadInput
from mgpu_doctor.matrix.compat_tables import CompatTableError
from mgpu_doctor.matrix.implied_tables import (
    bundled_keras_tensorflow_table,
    bundled_ngc_table,
    load_keras_tensorflow_table,
    load_ngc_table,
)
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.pasted.split import snapshot_from_paste

NAN_2_16 = "known-issue.tf-90686-mirrored-nan-since-tf216"  # tensorflow >=2.16,<2.20.dev0, 2+ GPUs, mirrored


def severities(terms: list[str]) -> dict[str, Severity]:
    return {f.code: f.severity for f in query(terms).findings}


def evidence(terms: list[str], code: str) -> str:
    return "\n".join(line for f in query(terms).findings if f.code == code for line in f.evidence)


# --- keras and tf-keras -------------------------------------------------------------------------

@pytest.mark.parametrize("package,version,spec", [
    # TensorFlow 2.16.1 to 2.19.1 declare keras>=3.0.0 .. >=3.5.0; 2.20.0 wants keras>=3.10.0
    ("keras", "3.5.0", ">=2.16.1,<=2.19.1"),
    # every TensorFlow listed up to the newest (2.21.0, keras>=3.12.0) admits 3.12.0: open above
    ("keras", "3.12.0", ">=2.16.1"),
    # from 2.6.2 on, TensorFlow pins its keras minor (2.6.0/2.6.1's `~=2.6` left out)
    ("keras", "2.13.1", ">=2.13.0,<=2.13.1"),
    ("keras", "2.4.0", ">=2.2.0"),  # keras 2.4.0 declares tensorflow>=2.2.0 itself
    ("keras", "3", ">=2.16.1"),  # a short version is every release it completes to (3.0 to 3.x)
    ("keras", "3.5", ">=2.16.1,<=2.19.1"),
    ("tf-keras", "2.16.0", "<2.17,>=2.16"),  # tf-keras declares its TensorFlow
])
def test_a_keras_version_implies_the_tensorflow_its_requirements_pair_it_with(package, version, spec):
    implied = implied_tensorflow(version if package == "keras" else "", version if package == "tf-keras" else "")
    assert implied is not None and implied.spec == spec
    assert implied.why.startswith(f"implied by {package}=={version}")


@pytest.mark.parametrize("keras", ["2.3.1", "2.2.4", "2.4.3"])
def test_standalone_keras_and_releases_declaring_nothing_imply_no_tensorflow(keras):
    # 2.3.1 and older were multi-backend; 2.4.3 declares no tensorflow requirement
    assert implied_tensorflow(keras, "") is None


def test_keras_3_5_alone_decides_a_keras_3_era_tensorflow_entry():
    terms = ["keras==3.5.0", "gpus=2", "strategy=mirrored"]
    assert severities(terms).get(NAN_2_16) is Severity.WARNING
    assert "implied by keras==3.5.0" in evidence(terms, NAN_2_16)
    # the same query with the TensorFlow 2.15 era's keras: the entry does not apply
    assert NAN_2_16 not in severities(["keras==2.15.0", "gpus=2", "strategy=mirrored"])


def test_a_named_tensorflow_wins_over_the_implied_range():
    env, _ = resolve_query(["keras==3.5.0", "tensorflow==2.20.0"])
    assert env.tensorflow.text == "2.20.0" and not env.tensorflow.range


def test_the_implied_range_is_a_range_not_a_version():
    env, _ = resolve_query(["tf-keras==2.17.0"])
    assert not env.tensorflow.known and env.tensorflow.range == "<2.18,>=2.17"
    matched = environment_from_resolved(env)
    assert "tensorflow" not in matched.versions and matched.ranges["tensorflow"] == "<2.18,>=2.17"


def test_the_table_holds_every_release_with_its_pypi_page():
    table = bundled_keras_tensorflow_table()
    tf = {r.version for r in table.rows if r.package == "tensorflow"}
    assert {"2.6.2", "2.15.1", "2.16.1", "2.21.0"} <= tf
    assert all(r.source == f"https://pypi.org/project/{r.package}/{r.version}/" for r in table.rows)


def test_a_table_row_without_a_source_is_refused(tmp_path: Path):
    path = tmp_path / "keras-tensorflow.toml"
    path.write_text('schema_version = 1\n[[tf_keras]]\ntf_keras = "2.16.0"\ntensorflow = "<2.17,>=2.16"\n')
    with pytest.raises(CompatTableError, match=r"tf_keras\[0\]\.source"):
        load_keras_tensorflow_table(path)


# --- images -------------------------------------------------------------------------------------

def test_a_tensorflow_image_tag_names_its_release_and_the_tested_build_follows():
    env, given = resolve_query(["image=tensorflow/tensorflow:2.18.0-gpu"])
    assert given["image"] == "tensorflow/tensorflow:2.18.0-gpu"
    assert env.tensorflow.text == "2.18.0" and env.tensorflow.origin is Origin.IMAGE
    assert env.build is BuildKind.PIP and env.built_cuda.text == "12.5"


def test_a_tag_without_a_release_names_none():
    facts = image_facts("tensorflow/tensorflow:latest-gpu")
    assert not facts.versions and "names no TensorFlow release" in facts.unknown


def test_an_ngc_image_is_nvidias_build_with_what_its_release_notes_state():
    env, _ = resolve_query(["image=nvcr.io/nvidia/tensorflow:23.03-tf2-py3"])
    assert env.build is BuildKind.NVIDIA
    assert env.cuda.text == "12.1.0"
    assert not env.built_cuda.known  # NVIDIA's build: the pip wheel's tested build is not assumed
    # The tf2 image's TensorFlow is in no source the table can cite: said, not guessed.
    assert not env.tensorflow.known and "23.03 tf2 is not in the NGC table" in str(env.tensorflow.missing)
    tf1, _ = resolve_query(["image=nvcr.io/nvidia/tensorflow:23.03-tf1-py3"])
    assert tf1.tensorflow.text == "1.15.5" and tf1.tensorflow.origin is Origin.IMAGE


def test_tensorflow_1_15_on_cuda_11_in_an_ngc_image_is_no_error():
    terms = ["image=nvcr.io/nvidia/tensorflow:21.04-tf1-py3", "tensorflow==1.15.5", "driver==465.19.01"]
    env, _ = resolve_query(terms)
    assert env.cuda.text == "11.3.0" and env.cudnn.text == "8.2.0.41"
    found = severities(terms)
    assert all(s < Severity.ERROR for s in found.values()) and "libraries.nvidia-build-only" not in found
    # the same pair without the image: only NVIDIA's build runs it, said as such
    assert "libraries.nvidia-build-only" in severities(["tensorflow==1.15.5", "cuda==11.3", "driver==465.19.01"])


def test_an_ngc_release_not_in_the_table_is_nvidias_build_with_tensorflow_unknown():
    env, _ = resolve_query(["image=nvcr.io/nvidia/tensorflow:24.01-tf2-py3"])
    assert env.build is BuildKind.NVIDIA and not env.tensorflow.known
    assert "24.01 is not in the NGC table" in str(env.tensorflow.missing)


def test_a_query_image_that_is_not_tensorflows_is_bad_input():
    with pytest.raises(NotAnImage):
        image_facts("nvcr.io/nvidia/pytorch:23.03-py3")
    with pytest.raises(BadInput, match="an image is tensorflow/tensorflow:TAG"):
        query(["image=ubuntu:22.04"])


def test_every_ngc_row_cites_a_source_and_marks_what_is_secondary(tmp_path: Path):
    table = bundled_ngc_table()
    assert table.release("23.03") is not None and Version(table.release("23.03").cuda) == Version("12.1.0")
    path = tmp_path / "ngc.toml"
    path.write_text('schema_version = 1\n[[release]]\nrelease = "23.03"\ntf2 = "2.11.0"\n'
                    'sources = ["https://example.org/x"]\nsecondary = ["tf2"]\n')
    with pytest.raises(CompatTableError, match=r"release\[0\]\.note"):
        load_ngc_table(path)


def test_a_pasted_ngc_image_resolves_as_the_query_does():
    text = "I run `docker run --gpus all nvcr.io/nvidia/tensorflow:23.03-tf2-py3` on 2 GPUs and get NaN.\n"
    env = resolve(snapshot_from_paste(text, "issue.txt"))
    assert env.build is BuildKind.NVIDIA and not env.tensorflow.known and env.cuda.text == "12.1.0"


def test_a_pasted_keras_version_implies_the_tensorflow_range():
    env = resolve(snapshot_from_paste("keras version: 3.5.0\nMirroredStrategy on 2 GPUs gives NaN.\n", "x"))
    assert env.tensorflow.range == ">=2.16.1,<=2.19.1"


def test_the_2_16_nan_entry_says_why_its_condition_is_every_mirrored_multi_gpu_run():
    from mgpu_doctor.matrix.known_issues import load_matrix
    from mgpu_doctor.matrix.paths import bundled_matrix_dir

    entry = load_matrix(bundled_matrix_dir()).get("tf-90686-mirrored-nan-since-tf216")
    assert entry is not None
    c = entry.conditions
    assert (c.min_gpus, c.strategy, c.gpu_names, c.usage, c.layers) == (2, ("mirrored",), (), (), ())
    assert "Why the condition is" in entry.summary and "none is named" in entry.summary


def test_an_ngc_image_gives_the_horovod_it_ships():
    env, _ = resolve_query(["image=nvcr.io/nvidia/tensorflow:20.03-tf1-py3"])
    assert env.horovod.text == "0.19.0" and env.horovod.origin is Origin.IMAGE
    assert not env.tensorflow.known  # 20.03's TensorFlow releases were not in the notes read
    named, _ = resolve_query(["image=nvcr.io/nvidia/tensorflow:20.03-tf1-py3", "horovod==0.19.5"])
    assert named.horovod.text == "0.19.5"  # what the query names wins


def test_a_broken_implied_table_is_bad_input_up_front(monkeypatch):
    import mgpu_doctor.matrix.implied_tables as tables

    def broken() -> None:
        raise CompatTableError("ngc-tensorflow.toml: field release[0].cuda: not a version: 'x'")

    monkeypatch.setattr(tables, "bundled_ngc_table", broken)
    with pytest.raises(BadInput, match="release\\[0\\]\\.cuda"):
        query(["keras==3.5.0"])


def test_a_check_skipped_for_an_unknown_tensorflow_says_why_once(capsys):
    from mgpu_doctor.cli import main

    main(["matrix", "query", "image=nvcr.io/nvidia/tensorflow:23.03-tf2-py3"])
    flat = " ".join(capsys.readouterr().out.split())
    assert ("(skipped: TensorFlow version not known (tensorflow not named in the query; the TensorFlow of "
            "NVIDIA's 23.03 tf2 is not in the NGC table))") in flat
    assert "(skipped: TensorFlow version not known (skipped:" not in flat
