"""The device table: per GPU, NVML's index, CUDA's ordinal, TensorFlow's device and what it is.

Computed once from the snapshot into the report (`check`, `devices`); renderers only draw it.
"""

from __future__ import annotations

from mgpu_doctor.environment.visibility import visible_gpus
from mgpu_doctor.model.device_row import DeviceRow
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable, absent, skipped


def device_rows(snapshot: Snapshot) -> list[DeviceRow]:
    """Every GPU NVML reports; empty when NVML did not answer."""
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable):
        return []
    env = snapshot.env
    vis = visible_gpus(nvml.gpus, env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER"))
    tf = snapshot.tensorflow
    tf_gpus: list[str] | Unavailable
    if isinstance(tf, Unavailable):
        tf_gpus = tf
    elif isinstance(tf.physical_devices, Unavailable):
        tf_gpus = tf.physical_devices
    else:
        tf_gpus = [d.name for d in tf.physical_devices if d.device_type == "GPU"]
    rows = []
    for gpu in nvml.gpus:
        hidden = gpu.index not in vis.visible
        ordinal: int | Unavailable
        if hidden:
            ordinal = absent("CUDA_VISIBLE_DEVICES hides this GPU", "hidden")
        elif not vis.order_known:
            ordinal = skipped("mixed GPU models without CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA's order may "
                              "differ from NVML's", "order-unknown")
        else:
            ordinal = vis.visible.index(gpu.index)
        rows.append(DeviceRow(
            nvml_index=gpu.index, cuda_ordinal=ordinal, tensorflow_device=_tf_device(tf_gpus, ordinal),
            name=gpu.name, memory_total_bytes=gpu.memory_total_bytes,
            compute_capability=gpu.compute_capability, pci_bus_id=gpu.pci_bus_id, mig_mode=gpu.mig_mode,
        ))
    return rows


def _tf_device(tf_gpus: list[str] | Unavailable, ordinal: int | Unavailable) -> str | Unavailable:
    if isinstance(ordinal, Unavailable):
        return ordinal
    if isinstance(tf_gpus, Unavailable):
        return tf_gpus
    if ordinal >= len(tf_gpus):
        return absent("TensorFlow does not list this GPU", "missing")
    return tf_gpus[ordinal]
