"""Process plumbing: children under a kill ladder, stop signals, inputs read within limits, masking.

May import: errors, record.
"""
