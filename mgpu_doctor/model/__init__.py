"""The data every layer passes on: snapshot, findings, report, smoke run records, versions, redaction.

May import: errors, record, process. (The sections a report holds are defined here; the packages above
compute and judge them.)
"""
