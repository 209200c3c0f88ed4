"""Probes gather facts. They are the only code with side effects.

May import: errors, record, process, model, environment.
"""
