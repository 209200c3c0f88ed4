"""Gates a team sets: requirements (--require-*) and the acknowledgements file.

May import: errors, record, process, model, matrix, environment, checks, smoke.
"""

# The acknowledgements file looked for in the working directory: named here, so that a run
# without one (most runs) does not import the reader (``acks.py``).
DEFAULT_FILE = ".mgpu-doctor.toml"
