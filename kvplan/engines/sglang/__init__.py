"""SGLang: its budget and pools (budget.py), its command line (dialect.py, flags.py), the startup lines explain
recognises (log_lines.py) and its calibration logs (data/)."""
