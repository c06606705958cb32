"""The records of SGLang's log that only SGLang prints."""

from kvplan.engines.log_lines import COUNT, NUMBER, Figures, LogLines, count, figure, gb_bytes

# "[%(asctime)s{prefix}] %(message)s" (srt/utils configure_logger), the time as 2025-10-07 23:17:19, 10-07
# 23:17:19 or 23:17:19 by release, the prefix the ranks (" DP0 TP0").
STAMP = r"\[(?:\d{4}-)?(?:\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z]+\d+)*\] "

LOG_LINES = LogLines(
    record_start=STAMP,
    # its stamp, then one of its sizing messages with the figure it prints (a mention in prose is not one): from
    # model_runner / scheduler (v0.3-v0.5) the pool, the memory around the weights, the token budget, the args
    recognised=STAMP + r"(?:KV Cache is allocated\. #tokens: \d|Memory pool end\. avail mem=\d|"
                       r"Load weight (?:begin|end)\..*avail mem=\d|max_total_num_tokens=\d|"
                       r"Mamba Cache is allocated\.|server_args=ServerArgs\(|"
                       r"Allocating \w+ hierarchical KV host pool: \d)",
    # the hierarchical cache's host pool, per rank (0.5.23 mem_cache/pool_host/base.py _allocate_host_buffer):
    # "Allocating kv hierarchical KV host pool: 1743862 tokens, 99.99 GB host memory." (GB: 10^9 B)
    kinds=(Figures(r"hierarchical KV host pool: \d",
                   figure(r"host pool: " + COUNT + r" tokens", "capacity", "offload_tokens", count),
                   figure(NUMBER + r" GB host memory", "capacity", "offload_rank_host_bytes", gb_bytes)),),
)
