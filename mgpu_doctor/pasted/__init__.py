"""Pasted text (an issue body: System information, nvidia-smi, pip list, TensorFlow log lines) read
into a Snapshot, nothing executed; one module per format, :mod:`.split` assembles the snapshot.

May import: errors, record, process, model, environment, checks.
"""

from __future__ import annotations
