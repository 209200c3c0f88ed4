"""Probes gather facts. They are the only code with side effects."""
