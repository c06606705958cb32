"""Print kvplan's calibration tables: vLLM's from-scratch residuals, then SGLang's and TensorRT-LLM's replays and
residuals (docs/calibration.md carries them)."""

from kvplan import calibration, engine_calibration

if __name__ == "__main__":
    rows = [calibration.from_scratch(entry) for entry in calibration.entries()]
    print(calibration.residual_table(rows))
    for table in engine_calibration.tables():
        print()
        print(table)
