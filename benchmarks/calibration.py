"""Print the from-scratch residual table of kvplan's vLLM model against the calibration logs."""

from kvplan import calibration

if __name__ == "__main__":
    rows = [calibration.from_scratch(entry) for entry in calibration.entries()]
    print(calibration.residual_table(rows))
