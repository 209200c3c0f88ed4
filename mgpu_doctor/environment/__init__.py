"""The one resolved environment: versions decided once, the GPUs CUDA sees, the library views,
TF_CONFIG read once.

May import: errors, record, process, model, matrix.
"""
