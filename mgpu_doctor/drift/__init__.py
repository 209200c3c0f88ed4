"""``check --baseline FILE``: what changed since a known-good run (versions, GPUs by UUID, the
environment, checks and smoke runs), as ``drift.*`` findings; the versions compared as ``fleet`` does.

May import: errors, record, process, model, environment, checks, fleet.
"""

from __future__ import annotations
