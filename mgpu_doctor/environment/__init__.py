"""The one resolved environment: versions decided once, the GPUs CUDA sees, the library views.

May import: errors, process, model, matrix.
"""
