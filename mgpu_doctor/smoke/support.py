"""Which TensorFlow releases each part of the doctor runs on: the support table of docs/smoke.md.

The child decides at run time from the TensorFlow it imported (`child_scripts/_tf_api.py`); this
table says the same for people, and tests/test_tf_versions.py holds the two equal on real
TensorFlow 1.15 to 2.21 (every smoke run skipped exactly where a row says the release lacks it,
every checkpoint format saved exactly where a row says it exists).
"""

from __future__ import annotations

from packaging.version import Version

from mgpu_doctor.record import record


@record
class Release:
    """A TensorFlow release and the Keras its tf.keras is (Keras 3 from 2.16, unless tf-keras)."""

    label: str  # "2.21 + tf-keras"
    tensorflow: str
    keras3: bool
    covered: frozenset[tuple[str, ...]] = frozenset()  # the rows' keys the version tests run on it

    @classmethod
    def of(cls, tensorflow: str, tf_keras: bool = False,
           covered: frozenset[tuple[str, ...]] = frozenset()) -> Release:
        keras3 = not tf_keras and Version(tensorflow) >= Version("2.16")
        return cls(tensorflow + (" + tf-keras" if tf_keras else ""), tensorflow, keras3, covered)


@record
class Support:
    """One part and the releases it runs on: from TensorFlow ``since``, with Keras 2 only where
    ``keras2_only`` (what Keras 3 dropped)."""

    part: str  # what the docs call it
    key: tuple[str, ...]  # ("smoke", layer, variant) or ("checkpoint", format): what the test compares
    since: str
    keras2_only: bool = False
    how: str = ""  # how it is spelled where that differs by release

    def holds(self, release: Release) -> bool:
        if Version(release.tensorflow) < Version(self.since):
            return False
        return not (self.keras2_only and release.keras3)


SUPPORT = (
    Support("probes (TensorFlow, packages, CUDA libraries)", ("probes",), "1.15",
            how="Python 3.6+; the build info from `tensorflow.python.platform.build_info` before 2.3"),
    Support("smoke: `dense`, `conv2d`, `embedding`", ("smoke", "dense", ""), "1.15",
            how="virtual CPU devices through `tf.config.experimental` before 2.4; "
                "TensorFlow 1 in graph mode, its initial weights from NumPy"),
    Support("smoke: `lstm`, `gru` generic kernel", ("smoke", "lstm", "generic"), "1.15",
            how="Keras 3: `use_cudnn=False`; Keras 2: `unroll=True` (never the cuDNN kernel)"),
    Support("smoke: `lstm`, `gru` cuDNN-eligible kernel on CPU devices", ("smoke", "lstm", "cudnn"), "2.0",
            how="TensorFlow 1: `CuDNNLSTM`/`CuDNNGRU`, GPUs only (skipped on CPU devices)"),
    Support("smoke: `batchnorm` plain", ("smoke", "batchnorm", "plain"), "1.15"),
    Support("smoke: `batchnorm` synchronized", ("smoke", "batchnorm", "sync"), "2.2",
            how="`SyncBatchNormalization` before 2.12, `BatchNormalization(synchronized=True)` after"),
    Support("smoke: `attention` (MultiHeadAttention)", ("smoke", "attention", ""), "2.4"),
    Support("smoke: uneven final batch", ("scenario", "uneven_final_batch"), "1.15"),
    Support("checkpoint: `.keras`", ("checkpoint", "keras"), "2.12"),
    Support("checkpoint: weights, `tf.train.Checkpoint`", ("checkpoint", "weights"), "1.15"),
    Support("checkpoint: SavedModel through `model.save`", ("checkpoint", "savedmodel"), "2.0",
            keras2_only=True, how="Keras 3 no longer writes it (tf-keras does)"),
    Support("checkpoint: HDF5 through `model.save`", ("checkpoint", "h5"), "1.15", keras2_only=True,
            how="Keras 3 no longer writes it (tf-keras does)"),
    Support("resume after a kill (`BackupAndRestore`)", ("scenario", "resume"), "2.3",
            how="`tf.keras.callbacks.experimental` before 2.8"),
    Support("multi-worker (`MultiWorkerMirroredStrategy`)", ("multiworker",), "1.15",
            how="`tf.distribute.experimental` before 2.4; the parent compares the workers' weights "
                "everywhere, the workers themselves (`strategy.gather`) from 2.3"),
)


def row(key: tuple[str, ...]) -> Support:
    """The row of ``key``; a variant's own key, or its layer's (``("smoke", "conv2d", "")`` is the
    `dense` row's kind: every layer without a row of its own trains wherever dense does)."""
    found = {s.key: s for s in SUPPORT}
    if key in found:
        return found[key]
    if key[:1] == ("smoke",):
        if key[1] == "gru":
            return row(("smoke", "lstm", *key[2:]))
        return found[("smoke", "dense", "")]
    if key == ("checkpoint", "tf_checkpoint"):
        return found[("checkpoint", "weights")]
    raise KeyError(key)


def supported(key: tuple[str, ...], release: Release) -> bool:
    return row(key).holds(release)


def markdown_table(tested: tuple[Release, ...]) -> str:
    """docs/smoke.md's table: a row per part, a column per TensorFlow release the test suite runs it on."""
    head = "| part | " + " | ".join(r.label for r in tested) + " | how |"
    rows = [head, "|---|" + "---|" * len(tested) + "---|"]
    for s in SUPPORT:
        cells = [("yes" if s.key in r.covered else "(yes)") if s.holds(r) else "–" for r in tested]
        rows.append(f"| {s.part} | " + " | ".join(cells) + f" | {s.how} |")
    return "\n".join(rows) + LEGEND


LEGEND = ("\n\nyes: run on that release by the version tests (`tests/test_tf_versions.py`); (yes): the code "
          "path is there, the version tests do not run it on that release (the rest of the suite runs "
          "everything on 2.21); –: not available there, the run is skipped with the reason.\n")
