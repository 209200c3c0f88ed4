"""``check --baseline FILE``: what changed since a known-good run (versions, GPUs by UUID, the
environment, checks and smoke runs), as ``drift.*`` findings; may import the model, fleet and checks.
"""

from __future__ import annotations
