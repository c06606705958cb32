"""The textbook engine: GPU memory x utilization - weights - a fixed reserve (budget.py), spoken with the shared
knobs only (dialect.py)."""
