"""How the user trains, read and applied: the profile declared in files or options
(``declared``), laid over the resolved environment the matrix matches (``apply``); the data is
``model/training.py``.

May import: errors, record, process, model, matrix, environment.
"""
