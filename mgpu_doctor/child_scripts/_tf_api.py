"""What the imported TensorFlow and Keras offer, from TensorFlow 1.15 to 2.21: every version
decision of the smoke scripts in one place (Python 3.6+, standard library; TensorFlow passed in).

The scripts ask an `Api` how to configure devices, seed, read a variable and build each smoke
variant; what this TensorFlow cannot do is a reason (`Api.unsupported`), which the worker reports
as a skipped run, never as an error of the environment.
"""

import importlib
import re

# The names run results give the Keras behind tf.keras (the parent reads "tf_keras" as the
# legacy package, "keras" as the keras package of that version).
KERAS_IN_TENSORFLOW = "tensorflow.keras"


def version_tuple(text):
    """The leading release numbers of a version: "2.15.1" -> (2, 15, 1), "2.2.4-tf" -> (2, 2, 4),
    "2.21.0rc1" -> (2, 21, 0); () when there are none."""
    numbers = []
    for part in str(text or "").split("."):
        match = re.match(r"\d+", part)
        if not match:
            break
        numbers.append(int(match.group(0)))
        if match.group(0) != part:
            break
    return tuple(numbers)


def keras_flavor(tf):
    """tf.keras, the distribution it comes from ("keras", "tf_keras", or "tensorflow.keras" for
    the copy inside TensorFlow 1.x-2.5) and its version."""
    keras = tf.keras
    name = (getattr(keras, "__name__", "") or "").split(".")[0]
    version = getattr(keras, "__version__", None)
    if name.startswith("tensorflow"):
        return keras, KERAS_IN_TENSORFLOW, str(version or "unknown")
    name = name or "tf_keras"
    if version is None:  # keras.api._v2.keras (2.13-2.15) and tf_keras do not carry it
        try:
            version = importlib.import_module(name).__version__
        except Exception:
            version = "unknown"
    return keras, name, str(version)


class Api(object):
    """The imported TensorFlow and its tf.keras, and how each thing the smoke does is spelled there."""

    def __init__(self, tf):
        self.tf = tf
        self.version = version_tuple(getattr(tf, "__version__", ""))
        self.keras, self.keras_name, self.keras_version = keras_flavor(tf)
        self.keras3 = self.keras_name == "keras" and version_tuple(self.keras_version)[:1] >= (3,)
        # What the models are built for: Keras 3's arguments, or tf.keras 2's.
        self.flavor = "keras" if self.keras3 else "tf_keras"
        self.framework = "%s %s" % (self.keras_name, self.keras_version)
        self.eager = bool(tf.executing_eagerly())

    @classmethod
    def keras3_without_tensorflow(cls, keras):
        """Keras 3 on another backend (JAX): what the stock models ask of it, no TensorFlow."""
        api = cls.__new__(cls)
        api.tf, api.version, api.keras = None, (), keras
        api.keras_name, api.keras_version = "keras", str(getattr(keras, "__version__", "unknown"))
        api.keras3, api.flavor, api.eager = True, "keras", True
        api.framework = "keras %s" % api.keras_version
        return api

    @property
    def label(self):
        return "TensorFlow %s" % ".".join(str(n) for n in self.version)

    # ------------------------------------------------------------------ devices

    def _config(self, name):
        """tf.config.NAME, or its tf.config.experimental form (TensorFlow 1.15-2.0)."""
        found = getattr(self.tf.config, name, None)
        return found if found is not None else getattr(self.tf.config.experimental, name)

    def physical_devices(self, kind):
        return self._config("list_physical_devices")(kind)

    def set_visible_devices(self, devices, kind):
        self._config("set_visible_devices")(devices, kind)

    def split_cpu(self, cpu, count):
        """``count`` logical devices on ``cpu``: tf.config.set_logical_device_configuration
        (2.4+) or tf.config.experimental.set_virtual_device_configuration (1.15-2.3)."""
        config = self.tf.config
        if hasattr(config, "set_logical_device_configuration"):
            config.set_logical_device_configuration(
                cpu, [config.LogicalDeviceConfiguration() for _ in range(count)])
        else:
            config.experimental.set_virtual_device_configuration(
                cpu, [config.experimental.VirtualDeviceConfiguration() for _ in range(count)])

    def logical_devices(self, kind):
        return self._config("list_logical_devices")(kind)

    # ------------------------------------------------------------------ seeds and values

    def set_seed(self, seed):
        """keras.utils.set_random_seed (2.7+), else Python's, NumPy's and TensorFlow's seeds."""
        setter = getattr(self.keras.utils, "set_random_seed", None)
        if setter is not None:
            setter(seed)
            return
        import random

        import numpy as np
        random.seed(seed)
        np.random.seed(seed)
        if hasattr(self.tf.random, "set_seed"):
            self.tf.random.set_seed(seed)
        else:
            self.tf.compat.v1.set_random_seed(seed)

    def same_start(self, model, seed):
        """In TensorFlow 1's graph mode the op seeds come from the graph, which the strategy
        changes: 1 and N devices would start from other weights. There the random initial weights
        are drawn again from NumPy, seeded, Glorot-uniform from the shape (a weight with one value
        throughout, a bias or a moving statistic, keeps it); in eager mode the seeds already agree."""
        if self.eager:
            return
        import numpy as np
        rng = np.random.RandomState(seed)
        fresh = []
        for w in model.get_weights():
            if not w.size or bool(np.all(w == w.flat[0])):
                fresh.append(w)
                continue
            fan_in = int(np.prod(w.shape[:-1])) if w.ndim > 1 else w.shape[0]
            limit = (6.0 / (fan_in + w.shape[-1])) ** 0.5
            fresh.append(rng.uniform(-limit, limit, w.shape).astype(w.dtype))
        model.set_weights(fresh)

    def values(self, variables):
        """NumPy copies of ``variables`` (also in TensorFlow 1's graph mode, from Keras' session)."""
        import numpy as np
        if self.eager:
            return [np.asarray(v) for v in variables]
        return [np.asarray(v) for v in self.keras.backend.batch_get_value(list(variables))]

    # ------------------------------------------------------------------ what each variant needs

    def unsupported(self, layer, variant, device_kind):
        """Why this TensorFlow cannot train (layer, variant) on ``device_kind`` devices, or ""."""
        if layer == "attention" and not hasattr(self.keras.layers, "MultiHeadAttention"):
            return "MultiHeadAttention needs TensorFlow 2.4 (this is %s)" % self.label
        if layer == "batchnorm" and variant == "sync" and self._sync_batchnorm() is None:
            return "SyncBatchNormalization needs TensorFlow 2.2 (this is %s)" % self.label
        if (layer in ("lstm", "gru") and variant == "cudnn" and self.version[:1] == (1,)
                and device_kind != "gpu"):
            return ("the cuDNN %s of %s (CuDNN%s) runs only on a GPU; the generic run trains the "
                    "same model here" % (layer.upper(), self.label, layer.upper()))
        return ""

    def recurrent(self, kind, variant, units):
        """An LSTM or GRU layer that takes the cuDNN kernel where it can ("cudnn") or never ("generic")."""
        layers = self.keras.layers
        cls = layers.LSTM if kind == "lstm" else layers.GRU
        if self.keras3:
            # use_cudnn="auto" takes the cuDNN kernel when eligible (on a GPU); False forces the
            # generic implementation. True would fail outright without a GPU.
            return cls(units, use_cudnn=("auto" if variant == "cudnn" else False))
        if variant == "cudnn":
            if self.version[:1] == (1,):  # tf.keras.layers.LSTM of TensorFlow 1 never uses cuDNN
                return getattr(self.tf.compat.v1.keras.layers, "CuDNN" + kind.upper())(units)
            return cls(units)  # tf.keras 2 takes the cuDNN kernel itself when the arguments allow it
        # tf.keras 2 takes the cuDNN kernel only when not unrolled (with tanh/sigmoid, no
        # recurrent dropout, a bias, and reset_after for GRU: keras/layers/rnn/lstm.py and gru.py,
        # recurrent_v2.py before 2.6). Unrolled, the same function runs on the generic kernel.
        return cls(units, unroll=True)

    def _sync_batchnorm(self):
        layers = self.keras.layers
        if self.keras3 or self.version[:2] >= (2, 12):
            return lambda: layers.BatchNormalization(synchronized=True)
        experimental = getattr(layers, "experimental", None)
        cls = getattr(experimental, "SyncBatchNormalization", None)
        return cls

    def batch_normalization(self, variant):
        if variant == "sync":
            return self._sync_batchnorm()()
        return self.keras.layers.BatchNormalization()

    # ------------------------------------------------------------------ checkpoints and strategies

    def checkpoint_formats(self):
        """The formats users save with here: `.keras` where this Keras writes it (Keras 3, tf.keras
        2.12+), SavedModel and HDF5 through model.save where it still writes them (before Keras 3)."""
        formats = []
        if self.keras3 or version_tuple(self.keras_version)[:2] >= (2, 12):
            formats.append("keras")
        formats.extend(["weights", "tf_checkpoint"])
        if not self.keras3 and self.version[:1] >= (2,):  # model.save(save_format="tf"): 2.0+
            formats.append("savedmodel")
        if not self.keras3:
            formats.append("h5")
        return tuple(formats)

    def load_model(self, path, custom_objects=None, compile=True):
        """keras.models.load_model; in TensorFlow 1 without the optimizer, which its Keras cannot
        restore under a MirroredStrategy scope (the predictions need none)."""
        compile = compile and self.version[:1] != (1,)
        return self.keras.models.load_model(path, custom_objects=custom_objects, compile=compile)

    def tf_checkpoint(self, model, path, write):
        """Write or read a tf.train.Checkpoint of ``model`` (in graph mode through Keras' session)."""
        checkpoint = self.tf.train.Checkpoint(model=model)
        if self.eager:
            if write:
                return checkpoint.write(path)
            return checkpoint.read(path).expect_partial()
        session = self.keras.backend.get_session()
        if write:
            return checkpoint.write(path, session=session)
        status = checkpoint.restore(path)  # TensorFlow 1's Checkpoint has no read()
        status.expect_partial()
        status.initialize_or_restore(session)
        return status

    def backup_and_restore(self):
        """keras.callbacks.BackupAndRestore (2.8+; experimental from 2.3), or None."""
        callbacks = self.keras.callbacks
        found = getattr(callbacks, "BackupAndRestore", None)
        if found is None:
            found = getattr(getattr(callbacks, "experimental", None), "BackupAndRestore", None)
        return found

    def strategy(self, names):
        """MirroredStrategy over ``names``, or OneDeviceStrategy for one device: the smoke's 1 vs N."""
        if len(names) > 1:
            return self.tf.distribute.MirroredStrategy(names)
        return self.tf.distribute.OneDeviceStrategy(names[0])

    def multi_worker_strategy(self):
        """tf.distribute.MultiWorkerMirroredStrategy (2.4+), or its experimental form before."""
        distribute = self.tf.distribute
        found = getattr(distribute, "MultiWorkerMirroredStrategy", None)
        return found if found is not None else distribute.experimental.MultiWorkerMirroredStrategy
