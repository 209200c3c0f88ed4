"""A user's model module that cannot be imported: it needs a package that is not installed."""

import tensorflow_addons_that_is_not_installed as tfa  # noqa: F401


def build():
    raise AssertionError("never reached: the import above fails")
