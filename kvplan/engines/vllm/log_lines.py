"""What vLLM's startup log prints, as kvplan reads it."""

from kvplan.units import GiB

PRINT_HALF_STEP = int(0.005 * GiB)  # vLLM prints GiB with two decimals: a printed figure is within this
