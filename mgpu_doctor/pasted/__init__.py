"""Pasted text (an issue body: System information, nvidia-smi, pip list, TensorFlow log lines) read
into a Snapshot; pure parsing, nothing executed. May import the snapshot model, never probes.

:mod:`.split` finds the parts and builds the snapshot; one module per format recognises its part.
"""

from __future__ import annotations
