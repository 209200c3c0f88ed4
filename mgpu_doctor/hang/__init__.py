"""A running job diagnosed while it hangs: its processes found, their stacks (py-spy), /proc state,
CPU time and GPUs read, what each waits for classified, and the verdict that names the odd one out.

May import: errors, record, process, model, matrix, probes.
"""
