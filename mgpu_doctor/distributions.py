"""The Python distributions that install the `tensorflow` package, the plain name first: the one list."""

TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-intel", "tf-nightly",
                    "tf-nightly-gpu", "tf-nightly-cpu")
