"""The Python distributions the doctor names by role: the one list of each."""

# NVIDIA's own TensorFlow build (1.15 built for CUDA 11 and newer, from NVIDIA's package index).
NVIDIA_TF_DISTRIBUTION = "nvidia-tensorflow"
# Distributions that install the `tensorflow` package, the plain name first.
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-intel", "tf-nightly",
                    "tf-nightly-gpu", "tf-nightly-cpu", NVIDIA_TF_DISTRIBUTION)
# Distributions built without CUDA: where only these are installed, TensorFlow is a CPU-only build
# before it is imported (`check --quick` says what the imported TensorFlow would).
TF_CPU_ONLY_DISTRIBUTIONS = ("tensorflow-cpu", "tf-nightly-cpu")

# Packages TensorFlow imports and pins in its Requires-Dist, which the packages probe records: a
# version outside TensorFlow's range breaks its import (numpy, protobuf, ml-dtypes) or its .h5
# files (h5py). Known-issue entries and `matrix query` name them as version keys.
TF_COMPANIONS = ("numpy", "protobuf", "ml-dtypes", "h5py")
