"""TensorRT-LLM: its budget (budget.py), its command line (dialect.py, flags.py) and LLM-API options file
(options.py), the startup lines explain recognises (log_lines.py) and its calibration logs (data/)."""
