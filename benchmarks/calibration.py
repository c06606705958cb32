"""Print kvplan's calibration tables: vLLM's from-scratch residuals, SGLang's and TensorRT-LLM's replays and
residuals, then the vLLM hybrid-model replays and residuals (docs/calibration.md carries them)."""

from kvplan.calibration import engines as engine_calibration
from kvplan.calibration import vllm as calibration

if __name__ == "__main__":
    rows = [calibration.from_scratch(entry) for entry in calibration.entries()]
    print(calibration.residual_table(rows))
    for table in (*engine_calibration.tables(), *engine_calibration.hybrid_tables()):
        print()
        print(table)
    print()
    print(engine_calibration.overall_line())
    print()
    print(calibration.cuda_graph_line())
