"""What vLLM's startup log prints, as kvplan reads it (the lines themselves: kvplan/explain/lines.py)."""

from kvplan.engines.log_lines import LogLines
from kvplan.units import GiB

PRINT_HALF_STEP = int(0.005 * GiB)  # vLLM prints GiB with two decimals: a printed figure is within this

# A record starts with a Ray worker's process prefix, a level and a date (INFO 10-07), or an ISO date.
LOG_LINES = LogLines(record_start=r"\(\w+ pid=\d+\)|(?:INFO|DEBUG|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d|"
                                  r"\[\d{4}-\d\d-\d\d")
