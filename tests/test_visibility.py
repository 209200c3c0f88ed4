from __future__ import annotations

from mgpu_doctor.environment.visibility import visible_gpus
from tests.scenarios import mixed_models, sick_box


def _gpus(snap):
    return snap.nvml.gpus


def test_unset_means_every_gpu_in_pci_order():
    vis = visible_gpus(_gpus(sick_box()), None, None)
    assert vis.visible == [0, 1, 2, 3] and vis.order_known


def test_indices_select_and_reorder():
    assert visible_gpus(_gpus(sick_box()), "2,0", None).visible == [2, 0]


def test_empty_string_hides_everything():
    assert visible_gpus(_gpus(sick_box()), "", None).visible == []


def test_cuda_stops_at_the_first_invalid_entry():
    vis = visible_gpus(_gpus(sick_box()), "1,7,2", None)
    assert vis.visible == [1]
    assert vis.invalid_entry == "7"
    assert vis.ignored_after_invalid == ["2"]


def test_uuid_prefixes_match_uniquely():
    gpus = _gpus(sick_box())
    full = gpus[2].uuid
    assert visible_gpus(gpus, full, None).visible == [2]
    assert visible_gpus(gpus, "GPU-00000003", None).visible == [3]
    # "GPU-0000000" is a prefix of all four: ambiguous, so invalid
    assert visible_gpus(gpus, "GPU-0000000", None).invalid_entry == "GPU-0000000"


def test_duplicates_are_reported_once_visible():
    vis = visible_gpus(_gpus(sick_box()), "0,0,1", None)
    assert vis.visible == [0, 1] and vis.duplicate_entries == ["0"]


def test_mixed_models_make_cuda_order_uncertain_unless_pci_bus_id():
    gpus = _gpus(mixed_models())
    assert not visible_gpus(gpus, None, None).order_known
    assert visible_gpus(gpus, None, "PCI_BUS_ID").order_known
    # selecting by UUID does not depend on the enumeration order
    assert visible_gpus(gpus, gpus[1].uuid, None).order_known
