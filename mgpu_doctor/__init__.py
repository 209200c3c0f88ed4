"""mgpu-doctor: finds multi-GPU Keras/TensorFlow environment problems before training does.

The folders follow the pipeline, each importing only the ones before it (its ``__init__`` says
which, and tests/test_architecture.py holds it):
``process`` (children, signals, inputs) -> ``model`` (snapshot, findings, report) -> ``matrix``
(sourced data) -> ``environment`` (the one resolved environment) -> ``checks`` and ``probes`` ->
``smoke``, ``fleet``, ``multiworker``, ``gate`` -> ``renderers`` -> ``diagnose`` (the pipeline) ->
``cli``. ``child_scripts`` run in the diagnosed interpreter and import nothing of the package.
Top-level modules: ``errors`` (imports nothing), ``diagnose``, ``code_table``, ``pytest_plugin``.
"""

__version__ = "0.1.0"
