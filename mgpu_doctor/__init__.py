"""mgpu-doctor: finds multi-GPU Keras/TensorFlow environment problems before training does."""

__version__ = "0.1.0"
