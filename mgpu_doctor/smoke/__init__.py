"""Smoke trainings: tiny Keras models per layer type on 1 and N devices, run in child processes.

``mgpu_doctor.model.smoke_runs`` holds the data (``SmokeSpec`` planned, ``SmokeRun`` measured),
``plan`` decides what runs, ``runner`` supervises the worker child, ``rules`` turns runs into findings.

May import: errors, record, process, model, matrix, environment, probes.
"""
