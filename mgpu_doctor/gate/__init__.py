"""Gates a team sets: requirements (--require-*) and the acknowledgements file.

May import: errors, process, model, matrix, environment, checks, smoke.
"""
