"""The guides the smoke findings link to (one place, so every finding names the same page)."""

DISTRIBUTE_GUIDE = "https://www.tensorflow.org/guide/distributed_training"
INPUT_GUIDE = "https://www.tensorflow.org/guide/data_performance"
