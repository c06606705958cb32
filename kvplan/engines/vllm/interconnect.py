"""What tensor parallelism adds to vLLM's non-torch memory, by how the GPUs are connected.

vLLM charges as non-torch only what is allocated outside torch after the worker's init snapshot (v1/worker/
gpu_worker.py init_device takes it after init_worker_distributed_environment, "This ensures NCCL buffers are
allocated before we measure available memory"), up to the end of the profiling run (memory_profiling in
determine_available_memory). So the custom all-reduce's IPC buffers and the NCCL communicators, built at start-up,
are not charged; two things grow later:

- NCCL's connections for the profiling run's first large all-reduces (the start-up warm-up moves one element):
  more channels, and so more buffers, over NVLink than over PCIe. Measured, not derived: 0.42 GiB over NVLink
  (data/calibration.yaml B03, vLLM 0.11.0, H100 TP 2: 0.55 GiB against 0.13 on one GPU) and 0.08 GiB over PCIe
  (an L40S TP 4 log of vLLM 0.10.2, read_file id 38962983769 "Hosting Qwen3-235B-A22B-Instruct-2507-FP8 on
  8xL40S": "0.21 GiB for non-torch memory" against 0.13 on one GPU).
- From v0.17, FlashInfer's all-reduce + RMSNorm fusion workspace, created while the profiling run compiles the
  model (compilation/passes/fusion/allreduce_rms_fusion.py AllReduceFusionPass -> flashinfer_all_reduce.py
  get_fi_ar_workspace), where vLLM turns the pass on (config/vllm.py enable_allreduce_rms_fusion, at -O2 and -O3;
  0.16.0 has it off at every level): TP > 1 on compute capability 9.0 or 10.x, PP 1 and DP 1 in 0.17.0 and 0.19.0,
  PP 1 only in 0.23.0, neither in 0.30.0; and only at TP 2, 4 or 8 (config/compilation.py flashinfer_max_size).
  Its tokens are min(the input size the release allows for the capability and TP, FI_ALLREDUCE_FUSION_MAX_SIZE_MB,
  // (hidden x the dtype's bytes), max_num_batched_tokens). flashinfer 0.6.4 / 0.6.6 comm/trtllm_ar.py
  trtllm_create_ipc_workspace_for_all_reduce_fusion allocates three buffers: TP x tokens x hidden x 2 B, a flag
  buffer, and three Lamport buffers of TP x tokens x hidden x 2 B (4 B in float32) together; each is a
  SymmDeviceMemory (comm/mnnvl.py _get_allocation_prop) rounded up to the multicast granularity. Without NVSwitch
  multicast is refused and vLLM runs without the fusion ("expected on GPUs without NVSwitch (e.g., NVLink
  bridge-only or PCIe topologies)", flashinfer_all_reduce._create_workspace). The recommended granularity is taken
  as 512 MiB: 3 x 512 MiB + 0.42 + 0.25 = 2.17 GiB is what the v0.19 NVSwitch H100 logs print at TP 2 and TP 4
  alike (2.06-2.21 GiB, data/calibration.yaml L02-L21), every buffer there being below it. Blackwell's granularity
  is taken as Hopper's; no log checks it.
"""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.hardware import links_of
from kvplan.plan import GpuChoice
from kvplan.units import GiB, MiB

NCCL_GROWTH = {"nvlink": int(0.42 * GiB), "pcie": int(0.08 * GiB)}
FUSION_FROM = (0, 17)
MULTICAST_GRANULARITY = 512 * MiB
# FI_ALLREDUCE_FUSION_MAX_SIZE_MB (0.19.0; 0.17.0 has the 90 and 100 rows): the largest input, MiB, by capability and TP
FUSION_MAX_INPUT_MB: dict[int, dict[int, float]] = {
    90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1}, 103: {2: 64, 4: 64, 8: 2}}
LAMPORT_COPIES = 3
MAX_COMM_BYTES = (2**31 - 1) & ~(2 * MiB - 1)  # trtllm_ar.py MAX_COMM_SIZE
PP_ONLY_ONE_UNTIL = (0, 24)  # read: 0.23.0 requires PP 1, 0.30.0 does not (0.24-0.29 not read)
DP_ONLY_ONE_UNTIL = (0, 20)  # read: 0.19.0 requires DP 1, 0.23.0 does not


def links(gpu: GpuChoice) -> str:
    """nvswitch, nvlink or pcie, from the catalogue; a GPU it does not flag is taken as NVSwitch-connected, the
    largest figure (as before this rule, when every TP deployment got the NVSwitch H100 logs' figure). A part whose
    NVLink bridge is optional (the catalogue's "bridge": RTX 3090, RTX A6000, A100 and H100 PCIe) is taken as
    bridgeless, PCIe: the 2 x RTX 5090 log engine-calibration Y12 prints 15.03 GiB of weights and non-torch memory
    together, its family's weights 14.68 (Y03's "Model loading took"), so 0.35 GiB of non-torch at TP 2 over PCIe,
    as this module gives (0.25 + 0.08)."""
    return {"none": "pcie", "bridge": "pcie", "nvlink": "nvlink"}.get(links_of(gpu.id) or "", "nvswitch")


def fusion_workspace(dep: Deployment, gpu: GpuChoice, release: tuple[int, int], hidden: int, dtype_bytes: int,
                     batched_tokens: int) -> int:
    """FlashInfer's all-reduce fusion workspace where vLLM creates it during profiling (see the module)."""
    if not _fusion_on(dep, gpu, release) or links(gpu) != "nvswitch":
        return 0
    capability = 90 if gpu.compute_capability is None else int(float(gpu.compute_capability) * 10)
    max_mb = FUSION_MAX_INPUT_MB.get(capability, {}).get(dep.tensor_parallel_size)
    if max_mb is None:
        return 0  # "Flashinfer allreduce fusion is not supported for world size"
    tokens = min(int(max_mb * MiB) // (hidden * dtype_bytes), batched_tokens)
    data = dep.tensor_parallel_size * tokens * hidden * 2
    lamport = LAMPORT_COPIES * min(dep.tensor_parallel_size * tokens * hidden * max(dtype_bytes, 2), MAX_COMM_BYTES)
    granule = MULTICAST_GRANULARITY
    return sum(-(-max(size, 1) // granule) * granule for size in (data, 1, lamport))  # the flags fit one granule


def _fusion_on(dep: Deployment, gpu: GpuChoice, release: tuple[int, int]) -> bool:
    """Whether vLLM's config turns fuse_allreduce_rms on (config/vllm.py enable_allreduce_rms_fusion)."""
    if release < FUSION_FROM or dep.tensor_parallel_size <= 1 or gpu.compute_major not in (9, 10, None):
        return False
    if gpu.compute_major is None and gpu.compute_capability is not None:
        return False  # another vendor's architecture (gfx942): not CUDA; an unknown device is taken as Hopper
    if gpu.compute_major == 10 and release < (0, 19) and gpu.compute_capability != "10.0":
        return False  # 0.17.0: is_device_capability(100); 0.19.0: the 10.x family
    if dep.enforce_eager or (dep.optimization_level is not None and dep.optimization_level < 2):
        return False  # no compiled graph to run the pass on; -O0 and -O1 leave fuse_allreduce_rms off
    return not ((release < PP_ONLY_ONE_UNTIL and dep.pipeline_parallel_size > 1) or (
        release < DP_ONLY_ONE_UNTIL and dep.data_parallel_size > 1))


def tp_growth(dep: Deployment, gpu: GpuChoice, release: tuple[int, int], hidden: int, dtype_bytes: int,
              batched_tokens: int) -> int:
    """What a TP rank grows outside torch beyond one GPU's figure: NCCL's connections plus the fusion workspace."""
    link = links(gpu)
    paired_only = link == "nvlink" and dep.tensor_parallel_size > 2  # H100 NVL's pairs; its 4-way bridge not modelled
    nccl = NCCL_GROWTH["pcie" if link == "pcie" or paired_only else "nvlink"]
    return nccl + fusion_workspace(dep, gpu, release, hidden, dtype_bytes, batched_tokens)
