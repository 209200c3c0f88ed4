"""One GPU as NVML, CUDA and TensorFlow each number it: a row of the device table."""

from __future__ import annotations

from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import record


@record
class DeviceRow:
    """One GPU as NVML, CUDA and TensorFlow each number it."""

    nvml_index: int
    cuda_ordinal: int | Unavailable  # absent (cause "hidden"): CUDA_VISIBLE_DEVICES hides it
    tensorflow_device: str | Unavailable  # /physical_device:GPU:0, or why it is not known
    name: str
    memory_total_bytes: int
    compute_capability: str | Unavailable
    pci_bus_id: str
    mig_mode: bool | Unavailable
