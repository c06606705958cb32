"""vLLM: its budget (budget.py, with the SSM dtype rules in ssm.py), its rules by release (releases.py), its
command line (dialect.py, flags.py), the startup lines explain reads (log_lines.py) and its calibration logs
(data/)."""
