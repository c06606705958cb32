"""The records of TensorRT-LLM's log."""

from kvplan.engines.log_lines import LogLines

# "[TensorRT-LLM][INFO] " from the C++ runtime, "[TRT-LLM] [I] " from the Python logger (after a time stamp), a rank
# tag possibly after the level.
STAMP = r"\[(?:TensorRT-LLM|TRT-LLM)\] ?\[(?:INFO|WARNING|WARN|ERROR|DEBUG|VERBOSE|TRACE|I|W|E|D|V)\]"

LOG_LINES = LogLines(
    record_start=r"\[TensorRT-LLM\]|\[TRT-LLM\]",
    # the level tag is TensorRT-LLM's own: any message after it is one of its records; so is the version banner
    # the Python package prints on import ("[TensorRT-LLM] TensorRT-LLM version: 0.10.0")
    recognised=STAMP + r" ?\S|\[TensorRT-LLM\] TensorRT-LLM version: \d",
)
