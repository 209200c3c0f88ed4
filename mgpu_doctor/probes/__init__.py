"""Probes gather facts. They are the only code with side effects.

May import: errors, process, model, environment.
"""
