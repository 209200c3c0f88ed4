"""Multi-worker smoke training on TensorFlow's own collective runtime (MultiWorkerMirroredStrategy):
TF_CONFIG validation, a launcher for K workers on this host, and findings from their outcomes.

May import: errors, record, process, model, matrix, environment, smoke.
"""
