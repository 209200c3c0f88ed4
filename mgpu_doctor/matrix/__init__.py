"""The version matrix: compatibility tables and known issues, as sourced data in TOML.

May import: errors, record, process, model.
"""
