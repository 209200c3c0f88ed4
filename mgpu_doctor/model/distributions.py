"""The Python distributions the doctor names by role: the one list of each."""

# Distributions that install the `tensorflow` package, the plain name first.
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-intel", "tf-nightly",
                    "tf-nightly-gpu", "tf-nightly-cpu")

# Packages TensorFlow imports and pins in its Requires-Dist, which the packages probe records: a
# version outside TensorFlow's range breaks its import (numpy, protobuf, ml-dtypes) or its .h5
# files (h5py). Known-issue entries and `matrix query` name them as version keys.
TF_COMPANIONS = ("numpy", "protobuf", "ml-dtypes", "h5py")
