"""The GPU a pod is placed on, from the node labels people select on: NVIDIA's GPU feature discovery
(nvidia.com/gpu.product), GKE's accelerator label, EKS instance types and Karpenter's GPU-name label, AMD's
device labeller; and from the names other formats use (KubeAI resource profiles, Ray Serve's accelerator_type).
Each maps to a catalogue id, or to a note saying why it does not."""

from __future__ import annotations

import re

from kvplan.errors import KvplanError

NVIDIA_PRODUCT = "nvidia.com/gpu.product"  # NVIDIA GPU feature discovery: NVIDIA-H100-80GB-HBM3
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
OLD_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
KARPENTER_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"  # MiB per GPU: tells an A100 40 GB from an 80 GB
AMD_PRODUCT = "amd.com/gpu.product-name"  # AMD's node labeller: AMD_Instinct_MI300X_OAM
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")  # the device plugins' extended resources

# GKE's accelerator names (cloud.google.com/kubernetes-engine/docs/how-to/gpus, "GPU models")
GKE = {"nvidia-tesla-t4": "t4", "nvidia-tesla-v100": "v100-16gb", "nvidia-l4": "l4",
       "nvidia-tesla-a100": "a100-40gb-sxm", "nvidia-a100-80gb": "a100-80gb-sxm", "nvidia-h100-80gb": "h100-sxm",
       "nvidia-h100-mega-80gb": "h100-sxm", "nvidia-h200-141gb": "h200", "nvidia-b200": "b200",
       "nvidia-rtx-pro-6000": "rtx-pro-6000-blackwell"}
# EC2 GPU instance families (aws.amazon.com/ec2/instance-types/, "Accelerated computing")
EC2 = {"g4dn": "t4", "g5": "a10g", "g6": "l4", "g6e": "l40s", "p3": "v100-16gb", "p3dn": "v100-32gb",
       "p4d": "a100-40gb-sxm", "p4de": "a100-80gb-sxm", "p5": "h100-sxm", "p5e": "h200", "p5en": "h200",
       "p6-b200": "b200"}
# Karpenter's instance-gpu-name values (lower case); an A100 or a V100 needs the memory label to say which
KARPENTER = {"t4": "t4", "a10g": "a10g", "l4": "l4", "l40s": "l40s", "h100": "h100-sxm", "h200": "h200",
             "b200": "b200"}
BY_MEMORY = {("a100", 40960): "a100-40gb-sxm", ("a100", 81920): "a100-80gb-sxm", ("v100", 16384): "v100-16gb",
             ("v100", 32768): "v100-32gb"}
# KubeAI's default resource profiles (charts/kubeai/values.yaml resourceProfiles), as PROFILE:COUNT
KUBEAI = {"nvidia-gpu-l4": "l4", "nvidia-gpu-h100": "h100-sxm", "nvidia-gpu-h200": "h200",
          "nvidia-gpu-a100-80gb": "a100-80gb-sxm", "nvidia-gpu-a100-40gb": "a100-40gb-sxm",
          "nvidia-gpu-a10g": "a10g", "nvidia-gpu-t4": "t4", "nvidia-gpu-l40s": "l40s", "amd-gpu-mi300x": "mi300x"}
# Ray's accelerator types (ray.util.accelerators: NVIDIA_TESLA_V100 = "V100", NVIDIA_A100 = "A100", ...)
RAY = {"V100": "v100-16gb", "T4": "t4", "A10G": "a10g", "L4": "l4", "L40S": "l40s", "A100-40G": "a100-40gb-sxm",
       "A100-80G": "a100-80gb-sxm", "H100": "h100-sxm", "H200": "h200", "B200": "b200", "H20": "h20",
       "AMD-Instinct-MI300X-OAM": "mi300x", "MI300X": "mi300x"}

NODE_LABELS = (NVIDIA_PRODUCT, GKE_ACCELERATOR, INSTANCE_TYPE, OLD_INSTANCE_TYPE, KARPENTER_GPU_NAME, AMD_PRODUCT)


def not_catalogued(value: str, where: str) -> str:
    return f"GPU {value!r} from {where} is not in kvplan's catalogue; pass --gpu or kvplan: {{gpu: ...}}"


def catalogue_id(name: str) -> str | None:
    from kvplan.hardware import find_gpu

    try:
        return find_gpu(name).id
    except KvplanError:
        return None


def label_gpu(label: str, value: str, labels: dict[str, str]) -> tuple[str | None, str | None]:
    """A node label's value as a catalogue id, or a note saying it is not one."""
    value = value.strip()
    if label == GKE_ACCELERATOR:
        found = GKE.get(value.lower())
    elif label in (INSTANCE_TYPE, OLD_INSTANCE_TYPE):
        found = EC2.get(value.lower().rsplit(".", 1)[0]) if "." in value else None
    elif label == KARPENTER_GPU_NAME:
        memory = re.sub(r"\D", "", str(labels.get(KARPENTER_GPU_MEMORY, "")))
        found = KARPENTER.get(value.lower()) or BY_MEMORY.get((value.lower(), int(memory) if memory else 0))
        if found is None and value.lower() in ("a100", "v100"):
            return None, (f"{KARPENTER_GPU_NAME} {value!r} is a 40 or 80 GB A100 (16 or 32 GB V100): add "
                          f"{KARPENTER_GPU_MEMORY}, or pass --gpu")
    elif label == AMD_PRODUCT:
        found = catalogue_id(value.replace("_", " ").replace("AMD Instinct ", "").split(" ")[0])
    else:
        found = catalogue_id(value)
    return (found, None) if found else (None, not_catalogued(value, label))


def profile_gpu(profile: str) -> tuple[str | None, int | None, str | None]:
    """A KubeAI resourceProfile (nvidia-gpu-l4:1): the GPU, how many, or a note."""
    name, _, count = profile.partition(":")
    found = KUBEAI.get(name.strip())
    number = int(count) if count.strip().isdigit() else None
    if found is None and name.strip() != "cpu":
        return None, number, not_catalogued(name, "the KubeAI resource profile")
    return found, number, None


def ray_gpu(accelerator: str) -> tuple[str | None, str | None]:
    """Ray Serve's accelerator_type (A100-80G, L4) as a catalogue id, or a note."""
    found = RAY.get(accelerator.strip()) or RAY.get(accelerator.strip().upper())
    if found is None and accelerator.strip().upper() == "A100":
        return None, "accelerator_type 'A100' is a 40 or 80 GB A100 (Ray's A100-40G and A100-80G say which)"
    return (found, None) if found else (None, not_catalogued(accelerator, "accelerator_type"))
