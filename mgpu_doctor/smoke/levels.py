"""The ``--level`` table: what each level trains and what it skips. Apart from the plan
(``plan.py``), so that the command line's options and help read it without importing the smoke
engine's data types (`check --quick` trains nothing)."""

from __future__ import annotations

from mgpu_doctor.record import record

DEFAULT_GLOBAL_BATCH = 64


@record
class Level:
    """One ``--level``, like a hardware diagnostic's run levels: what it trains and what it skips.

    The plan, the option help and the README follow this one table; the README says what each
    level costs and what it can miss.
    """

    name: str
    trains: bool  # quick: no TensorFlow import, no smoke training
    epochs: int  # the first traces; speed needs a second; a memory slope needs 3 or more
    steps: int  # full batches per epoch; the uneven scenario adds one sample
    # Global batches: every scenario runs at the first; the others (the sweep) compare speed only.
    batch_sizes: tuple[int, ...]
    # Where the uneven-final-batch scenario runs: only layers an empty replica can break, or all.
    uneven_everywhere: bool
    # The 1-device twin of the uneven scenario: different data, so its comparison is only info.
    single_device_uneven: bool
    # A variant that trains the same as another here (cuDNN where there is none, synchronized
    # BatchNormalization on one device) also runs, although its twin's run says the same.
    same_twice: bool
    summary: str
    # The checkpoint scenarios (smoke/checkpoint.py), each on N devices: save and reload in every
    # format, and resume after a kill with BackupAndRestore. The layers they run for (EVERY_LAYER:
    # each row of the layer table).
    checkpoint_layers: tuple[str, ...] = ()
    resume_layers: tuple[str, ...] = ()
    # The scaling map: model sizes (width multipliers) the layers in ``map_layers`` train at,
    # each at every batch of ``batch_sizes`` (``--model-sizes`` applies to every planned layer).
    model_sizes: tuple[int, ...] = (1,)
    map_layers: tuple[str, ...] = ()
    # The input-bound probe runs on the N-device run of these layers (smoke/input_bound.py);
    # where none of them is planned, on the first planned layer.
    input_probe_layers: tuple[str, ...] = ()
    # The leak probe runs unless asked not to (`--no-leak-probe`); elsewhere only when asked.
    leak_probe: bool = False
    # The usage scenarios (smoke/usage.py: mixed precision, XLA, a custom loop, a distributed
    # dataset), 1 vs N, for these layers: every one at this level (``usage_everywhere``), else only
    # those the training profile or the model declares (``SmokeOptions.usage``).
    usage_layers: tuple[str, ...] = ()
    usage_everywhere: bool = False


EVERY_LAYER = ("*",)
LEVELS: dict[str, Level] = {level.name: level for level in (
    Level("quick", trains=False, epochs=0, steps=0, batch_sizes=(), uneven_everywhere=False,
          single_device_uneven=False, same_twice=False,
          summary="facts only: no TensorFlow import, no training"),
    Level("standard", trains=True, epochs=2, steps=4, batch_sizes=(DEFAULT_GLOBAL_BATCH,),
          uneven_everywhere=False, single_device_uneven=False, same_twice=False,
          summary="every layer type on 1 and N devices; the uneven final batch where an empty "
                  "replica can break the layer; 2 epochs; a checkpoint round trip of dense",
          checkpoint_layers=("dense",), input_probe_layers=("dense",), usage_layers=("dense",)),
    Level("long", trains=True, epochs=8, steps=4, batch_sizes=(DEFAULT_GLOBAL_BATCH, 256, 1024),
          uneven_everywhere=True, single_device_uneven=True, same_twice=True,
          summary="every variant x scenario on 1 and N devices, a batch-size sweep, the scaling "
                  "map of dense and conv2d over model sizes 1,4,16, 8 epochs (memory growth), a "
                  "checkpoint round trip of every layer type, resume after a kill, the leak probe, every "
                  "layer with mixed precision, XLA, a custom loop and a distributed dataset",
          checkpoint_layers=EVERY_LAYER, resume_layers=("dense",), model_sizes=(1, 4, 16),
          map_layers=("dense", "conv2d"), input_probe_layers=EVERY_LAYER, leak_probe=True,
          usage_layers=EVERY_LAYER, usage_everywhere=True),
)}
DEFAULT_LEVEL = "standard"
SMOKE_LEVELS = tuple(name for name, level in LEVELS.items() if level.trains)
