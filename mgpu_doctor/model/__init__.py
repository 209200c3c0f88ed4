"""The data every layer passes on: snapshot, findings, report, smoke run records, versions, redaction.

May import: errors, process. (The report names sections computed above it only for type checking.)
"""
