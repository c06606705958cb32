"""Issue 20 item 4: vLLM's multimodal encoder cache budget and the encoder outputs its profiling run holds
(kvplan/engines/vllm/multimodal.py), driven by --limit-mm-per-prompt, --mm-processor-kwargs and the processors'
maximum sizes, checked against vLLM 0.23.0's gemma-4-31b-it log (engine-calibration Y13) and derived by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.calibration import engines as calibration
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError
from kvplan.explain import read_log
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice
from kvplan.units import GiB

Y13 = {entry["id"]: entry for entry in calibration.entries()}["Y13"]


def _plan(model: str, **knobs):
    gpu = find_gpu("h100")
    dep = Deployment(engine="vllm", engine_version="0.33.0", gpu=gpu.id, max_model_len=32768, **knobs)
    choice = GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 1, gpu.compute_capability, gpu.fp8)
    return plan_deployment(resolve(model), dep, choice)


def test_gemma4_31b_log_encoder_budget_and_items():
    # Y13 prints "Encoder cache will be initialized with a budget of 8192 tokens, and profiled with 3 video items
    # of the maximum feature size" (limit_mm_per_prompt {'image': 4}, video left at 999). By hand (vLLM 0.23.0
    # gemma4_mm.py): an image 280 soft tokens; a video 32 frames x (70 soft + 8 text) = 2,496 tokens, the larger;
    # budget max(8,192 batched tokens, 2,496) = 8,192; items min(8,192 // 2,496 = 3, 20 seqs x min(999,
    # 32,768 // 2,496 = 13)) = 3. Held through the decoder's dummy run (profile_run keeps batched_dummy_mm_inputs
    # and the encoder outputs): each dummy frame is 224 x 224 (Gemma4DummyInputsBuilder), which
    # _compute_num_soft_tokens scales by sqrt(630 / 14^2) to floor(401.6 / 48) x 48 = 384 a side, 24 x 24 = 576
    # patches, 64 soft tokens (not the 70 the budget counts); its pixel_values are padded to 70 x 3^2 = 630 patches
    # of 16^2 x 3 values in bfloat16, its positions 630 x 2 int64. Per video 32 x (64 x 5,376 x 2 + 630 x 768 x 2
    # + 630 x 16) = 53,308,416 B, for 3 videos 159,925,248.
    plan = calibration.vllm_plan(Y13)
    assert plan.engine.encoder_cache_tokens == Y13["encoder_budget_tokens"] == 8192
    assert plan.memory.encoder_bytes == 3 * 32 * (64 * 5376 * 2 + 630 * 768 * 2 + 630 * 16) == 159_925_248
    assert any("3 video item(s) of 2,496 tokens" in note for note in plan.notes)


def test_gemma4_31b_log_pool_replay_and_from_scratch():
    # From the logged 28.41 GiB the pool gives the log's 97,541 tokens and 2.98x; from scratch (the inferred
    # RTX PRO 6000, weights counted from the config) 96,803 tokens, 0.76 % below the log (weights 58.96 GiB with the
    # V slot, models/resident.py, against the logged 58.99; CUDA graphs 0.37 against 0.13).
    replay = calibration.pool_replay(Y13)
    assert replay.closes and replay.low.tokens <= 97_541 <= replay.high.tokens
    tokens = calibration.vllm_plan(Y13).capacity.tokens
    assert abs(tokens - Y13["tokens"]) / Y13["tokens"] < 0.02


def test_text_only_run_has_no_encoder_profile():
    # limit_mm_per_prompt image 0 and video 0 (or --language-model-only): MultiModalBudget has no tower modality,
    # profile_run encodes nothing; the peak is the text model's.
    off = _plan("Qwen/Qwen2.5-VL-7B-Instruct", limit_mm_per_prompt={"image": 0, "video": 0})
    also_off = _plan("Qwen/Qwen2.5-VL-7B-Instruct", language_model_only=True)
    images = _plan("Qwen/Qwen2.5-VL-7B-Instruct", limit_mm_per_prompt={"video": 0})
    assert off.engine.encoder_cache_tokens is None and off.memory.encoder_bytes == 0
    assert also_off.memory.activation_bytes == off.memory.activation_bytes
    # images on: 12,845,056 max pixels / (14 x 2)^2 = 16,384 merged patches (128 x 128), one item; its
    # 16,384 embeddings of 3,584 x 2 B stay in the encoder cache: 117,440,512 B more peak, less KV. Model Runner
    # V2 (0.33.0's default) drops the item's inputs when the encoder returns (gpu/mm/encoder_runner.py).
    assert images.engine.encoder_cache_tokens == 16384
    assert images.memory.encoder_bytes == 16384 * 3584 * 2 == 117_440_512
    assert images.memory.activation_bytes - off.memory.activation_bytes == 117_440_512
    # V1 keeps them through the decoder's run too (gpu_model_runner.py profile_run's batched_dummy_mm_inputs):
    # its pixel_values, 16,384 x 2^2 patches of 3 x 2 x 14^2 values in bfloat16, 154,140,672 B more.
    v1 = _plan("Qwen/Qwen2.5-VL-7B-Instruct", limit_mm_per_prompt={"video": 0}, v2_model_runner=False)
    assert v1.memory.encoder_bytes == 117_440_512 + 16384 * 4 * 1176 * 2 == 271_581_184
    assert images.capacity.tokens < off.capacity.tokens


def test_qwen25_vl_video_outgrows_the_image_at_32k():
    # qwen2_vl.py get_max_video_tokens: frames grow while the video fits max_model_len (32,768): 4 frames = 2
    # temporal patches x 16,384 = 32,768 tokens, more than an image, so the video is profiled, budget 32,768.
    plan = _plan("Qwen/Qwen2.5-VL-7B-Instruct")
    assert plan.engine.encoder_cache_tokens == 32768
    assert plan.memory.encoder_bytes == 32768 * 3584 * 2


def test_max_pixels_from_mm_processor_kwargs():
    # --mm-processor-kwargs '{"max_pixels": 1003520}': 1,003,520 / 784 = 1,280 merged patches (32 x 40); budget
    # max(8,192, 1,280) = 8,192; items 8,192 // 1,280 = 6.
    plan = _plan("Qwen/Qwen2.5-VL-7B-Instruct", limit_mm_per_prompt={"video": 0},
                 mm_processor_kwargs={"max_pixels": 1003520})
    assert plan.engine.encoder_cache_tokens == 8192
    assert plan.memory.encoder_bytes == 6 * 1280 * 3584 * 2


def test_qwen3_vl_image_with_deepstack_width():
    # Qwen3-VL: 16,777,216 longest edge / (16 x 2)^2 = 16,384 tokens; the video processor's 25,165,824 / 2
    # frames / 1,024 = 12,288, smaller: one image. Its embeddings carry 3 deepstack levels beside the output:
    # 4,096 x (1 + 3) wide. Under V1 its pixel_values stay too: 4 patches a token of 3 x 2 x 16^2 bfloat16 values.
    plan = _plan("Qwen/Qwen3-VL-8B-Instruct")
    assert plan.engine.encoder_cache_tokens == 16384
    assert plan.memory.encoder_bytes == 16384 * 4096 * 4 * 2
    v1 = _plan("Qwen/Qwen3-VL-8B-Instruct", v2_model_runner=False)
    assert v1.memory.encoder_bytes == 16384 * 4096 * 4 * 2 + 16384 * 4 * 1536 * 2 == 738_197_504


def test_gemma3_images_of_256_tokens():
    # gemma3_mm.py: 256 soft tokens an image; budget 8,192 holds 32, under 1,024 seqs x 32 per prompt. Under
    # V1 each dummy's 896 x 896 image (get_image_size_with_most_features without pan-and-scan) stays on the GPU
    # too: 3 x 896^2 pixel_values in bfloat16 beside its 256 embeddings (num_patches stays on the CPU).
    plan = _plan("google/gemma-3-27b-it")
    assert plan.engine.encoder_cache_tokens == 8192
    assert plan.memory.encoder_bytes == 32 * 256 * 5376 * 2
    v1 = _plan("google/gemma-3-27b-it", v2_model_runner=False)
    assert v1.memory.encoder_bytes == 32 * (256 * 5376 * 2 + 3 * 896 * 896 * 2) == 242_221_056


def test_bad_limit_is_one_line_error():
    with pytest.raises(KvplanError, match="count must be an integer"):
        _plan("google/gemma-3-27b-it", limit_mm_per_prompt={"image": -1})


@pytest.mark.parametrize(("knobs", "message"), [
    ({"limit_mm_per_prompt": {"video": {"count": 1, "num_frames": -3}}}, "num_frames must be a positive integer"),
    ({"mm_processor_kwargs": {"images_kwargs": 5}}, "images_kwargs: expected a JSON object"),
    ({"mm_processor_kwargs": {"max_pixels": 10**20}}, "max_pixels must be an integer from 1 to 4,294,967,296"),
])
def test_absurd_multimodal_knobs_are_refused(knobs, message):
    # a negative Gemma 4 frame count gave negative tokens, a non-object images_kwargs an AttributeError, and a
    # 10^20-pixel maximum a grid search that does not end
    model = "google/gemma-4-26B-A4B" if "limit_mm_per_prompt" in knobs else "Qwen/Qwen2.5-VL-7B-Instruct"
    with pytest.raises(KvplanError, match=message):
        _plan(model, **knobs)


def test_explain_reads_the_encoder_line():
    log = ("(EngineCore pid=594) INFO 08-04 13:15:51 [gpu_model_runner.py:6200] Encoder cache will be initialized "
           "with a budget of 8192 tokens, and profiled with 3 video items of the maximum feature size.\n"
           "(EngineCore pid=594) INFO 08-04 13:16:47 [kv_cache_utils.py:1744] GPU KV cache size: 97,541 tokens\n")
    run = read_log(log)
    assert run.first("capacity", "encoder_cache_tokens") == 8192
    assert run.first("capacity", "encoder_items") == 3


def test_skip_mm_profiling_keeps_the_budget_and_adds_nothing():
    plan = _plan("google/gemma-3-27b-it", skip_mm_profiling=True)
    assert plan.engine.encoder_cache_tokens == 8192 and plan.memory.encoder_bytes == 0
    assert round(plan.memory.encoder_bytes / GiB, 2) == 0


def test_qwen3_vl_tower_weights_by_hand():
    # Qwen3-VL-8B-Instruct (models/tower_params.py qwen3_vl): patch embedding 3 x 2 x 16^2 x 1,152 + 1,152 =
    # 1,770,624; positions 2,304 x 1,152 = 2,654,208; 27 blocks of 4 x 1,152 (two LayerNorms) + 1,152 x 3,456
    # + 3,456 + 1,152^2 + 1,152 + 1,152 x 4,304 + 4,304 + 4,304 x 1,152 + 1,152 = 15,239,504; the merger 2 x 1,152
    # + 4,608^2 + 4,608 + 4,608 x 4,096 + 4,096 = 40,119,040; 3 deepstack mergers of 2 x 4,608 + the same MLP =
    # 40,125,952 each. 576,388,336 beside the text model's 8,190,735,360 (Qwen3-8B's): the Hub's safetensors
    # total for Qwen/Qwen3-VL-8B-Instruct, 8,767,123,696.
    spec = resolve("Qwen/Qwen3-VL-8B-Instruct")
    assert spec.params.vision == 1_770_624 + 2_654_208 + 27 * 15_239_504 + 40_119_040 + 3 * 40_125_952
    assert spec.params.total == 8_767_123_696 and spec.params.exact


def test_text_only_run_does_not_load_the_vision_tower():
    # interfaces.py _mark_tower_model: with every modality of the tower at 0 vLLM builds no tower, so its
    # 676,550,144 parameters (Qwen2.5-VL-7B's visual module) x 2 B are not in the weights; a limit above 0 keeps it.
    off = _plan("Qwen/Qwen2.5-VL-7B-Instruct", limit_mm_per_prompt={"image": 0, "video": 0})
    on = _plan("Qwen/Qwen2.5-VL-7B-Instruct", limit_mm_per_prompt={"image": 0, "video": 1})
    assert on.memory.weights_bytes - off.memory.weights_bytes == 676_550_144 * 2
    # Gemma 3's tower serves images only: image 0 alone skips it
    gemma = _plan("google/gemma-3-27b-it", limit_mm_per_prompt={"image": 0})
    plain = _plan("google/gemma-3-27b-it")
    assert plain.memory.weights_bytes - gemma.memory.weights_bytes == 423_060_336 * 2


def test_bidirectional_vision_needs_one_item_in_the_batch():
    # Gemma 4's use_bidirectional_attention "vision" makes vLLM force --disable-chunked-mm-input (platforms/cuda.py;
    # the Y13 log: "Forcing --disable_chunked_mm_input for models with multimodal-bidirectional attention"), and
    # compute_mm_encoder_budget then refuses an item larger than the batch: a 2,496-token video over 2,048.
    entry = {**Y13, "max_num_batched_tokens": 2048}
    with pytest.raises(KvplanError, match=r"max_tokens_per_mm_item \(2496\) is larger than max_num_batched_tokens"):
        calibration.vllm_plan(entry)
    # with videos off the largest item is a 280-token image: 2,048 // 280 = 7 images. Each 224 x 224 dummy is
    # scaled by sqrt(2,520 / 14^2) to floor(803.2 / 48) x 48 = 768 a side, 48^2 = 2,304 patches, 256 soft tokens,
    # its patches padded to 280 x 9 = 2,520 (768 bfloat16 values and 2 int64 positions each).
    plan = calibration.vllm_plan({**entry, "limit_mm_per_prompt": {"image": 4, "video": 0}})
    assert plan.engine.encoder_cache_tokens == 2048
    assert plan.memory.encoder_bytes == 7 * (256 * 5376 * 2 + 2520 * 768 * 2 + 2520 * 16) == 46_644_864
    # Qwen2.5-VL attends causally: its 16,384-token image is chunked into a 2,048-token batch
    qwen = _plan("Qwen/Qwen2.5-VL-7B-Instruct", max_num_batched_tokens=2048, limit_mm_per_prompt={"video": 0})
    assert qwen.engine.encoder_cache_tokens == 16384


def test_llama4_image_of_sixteen_tiles_and_the_global_one():
    # mllama4.py: a 16:1 dummy image of max_patches 16 tiles of 336 px, each (336 / 14)^2 / (1 / 0.5^2) = 144
    # patches after pixel shuffle, and the global tile: 17 x 144 = 2,448 tokens; 8,192 // 2,448 = 3 items, as a
    # public Llama-4-Scout TP 8 log prints ("budget of 8192 tokens, and profiled with 3 image items", stored
    # id 14030680623).
    plan = _plan("meta-llama/Llama-4-Scout-17B-16E-Instruct", tensor_parallel_size=4)
    assert plan.engine.encoder_cache_tokens == 8192
    assert plan.memory.encoder_bytes == 3 * 17 * 144 * 5120 * 2
    # under V1 each image's 17 tiles of 3 x 336^2 pixel values in bfloat16 (Llama4ImageProcessor) stay too
    v1 = _plan("meta-llama/Llama-4-Scout-17B-16E-Instruct", tensor_parallel_size=4, v2_model_runner=False)
    assert v1.memory.encoder_bytes == 3 * (17 * 144 * 5120 * 2 + 17 * 3 * 336 * 336 * 2) == 109_748_736
    assert any("3 image item(s) of 2,448 tokens" in note for note in plan.notes)


def test_explain_checks_the_logged_encoder_budget():
    # Y13's own lines (tests/fixtures/explain/SOURCES.md): explain replays its 28.41 GiB and sets kvplan's encoder
    # budget (8,192: the 2,496-token video under 8,192 batched tokens) against the logged 8192.
    from kvplan.explain import explain

    log = Path(__file__).parent / "fixtures" / "explain" / "gemma-4-31b-it-rtxpro6000-v0.23-y13.log"
    model = Path(calibration.MODELS) / "gemma-4-31b-it.json"
    result = explain(log.read_text(encoding="utf-8"), model=str(model), gpu="rtx-pro-6000-blackwell")
    checks = {check.figure: check for check in result.checks}
    assert checks["encoder_cache_tokens"].logged == 8192 and checks["encoder_cache_tokens"].matches
    assert checks["tokens"].matches


def test_encoder_tp_mode_data_keeps_the_tower_whole_on_each_rank():
    # --mm-encoder-tp-mode data (config/multimodal.py): where the model class sets supports_encoder_tp_data
    # (qwen2_5_vl.py) each TP rank holds the whole tower: Qwen2.5-VL-7B at TP 2 holds 676,550,144 x 2 B / 2 more;
    # Gemma 3 does not support it and vLLM falls back to 'weights' (config/model.py): nothing changes.
    split = _plan("Qwen/Qwen2.5-VL-7B-Instruct", tensor_parallel_size=2)
    whole = _plan("Qwen/Qwen2.5-VL-7B-Instruct", tensor_parallel_size=2, mm_encoder_tp_mode="data")
    assert whole.memory.weights_bytes - split.memory.weights_bytes == 676_550_144 * 2 // 2
    gemma = _plan("google/gemma-3-27b-it", tensor_parallel_size=2, mm_encoder_tp_mode="data")
    assert gemma.memory.weights_bytes == _plan("google/gemma-3-27b-it", tensor_parallel_size=2).memory.weights_bytes
    assert any("falls back to 'weights'" in note for note in gemma.notes)


def test_gemma4_tower_peak_by_hand():
    # The tower's own run (gemma4_mm.py _process_video_input with transformers' Gemma4VisionModel): Y13's 3 videos
    # are 96 frames of 630 patches. _encoder_chunk: min(free // 2, total // 10) = 101,973,261,025 // 10 (the
    # weights leave more than twice that free) // (630 x 4 x 10,240 x 8 = 206,438,400) = 49 frames a chunk, so
    # chunks of 49 and 47. A frame in a chunk holds at an encoder layer's MLP: its patch embeddings, the residual
    # and the normed stream (3 x 630 x 1,152 x 2 B), gelu(gate), up and their product (3 x 630 x 4,304 x 2 B), its
    # 630 x 630 bool mask and cos / sin (2 x 630 x 72 x 2 B): 21,202,020 B. The second chunk also keeps the first
    # one's last hidden states (49 x 630 x 1,152 x 2 B), and the batch's inputs (3 x 32 x (630 x 768 x 2 + 630 x
    # 16) B) stay throughout: 1,161,484,380 B, under the decoder's run with its held bytes, which sets the peak.
    per_frame = 3 * 630 * 1152 * 2 + 3 * 630 * 4304 * 2 + 630 * 630 + 2 * 630 * 72 * 2
    inputs = 3 * 32 * (630 * 768 * 2 + 630 * 16)
    assert per_frame == 21_202_020 and inputs == 93_864_960
    tower = inputs + 49 * 630 * 1152 * 2 + 47 * per_frame
    assert tower == 1_161_484_380 > inputs + 49 * per_frame
    plan = calibration.vllm_plan(Y13)
    assert any("the tower's own run peaks at 1.08 GiB" in note for note in plan.notes)
    assert plan.memory.activation_bytes > tower
    # Y13's implied peak plus non-torch memory: 0.94 x 94.97 GiB less the logged 58.99 (weights), 0.13 (CUDA
    # graphs) and 28.41 (KV) GiB = 1.742 GiB, each logged figure +-0.005. kvplan: 1.749 GiB (it was 1.668 with
    # the 70-token outputs alone, before the inputs were counted).
    implied = plan.memory.budget_bytes - (58.99 + 0.13 + 28.41) * GiB
    assert abs(plan.memory.activation_bytes + plan.memory.non_torch_bytes - implied) < 0.015 * GiB
    # At 2,048 batched tokens with videos off the decoder's run is smaller than the tower's: 7 images of 2,520
    # patches go through in one chunk (825,753,600 B a frame of one-hot budget, 12 fit): 7 x (3 x 2,520 x 1,152
    # x 2 + 3 x 2,520 x 4,304 x 2 + 2,520^2 + 2 x 2,520 x 72 x 2) + 7 x (2,520 x 768 x 2 + 2,520 x 16) B.
    small = calibration.vllm_plan({**Y13, "max_num_batched_tokens": 2048,
                                   "limit_mm_per_prompt": {"image": 4, "video": 0}})
    image = 3 * 2520 * 1152 * 2 + 3 * 2520 * 4304 * 2 + 2520 * 2520 + 2 * 2520 * 72 * 2
    assert small.memory.activation_bytes == 7 * image + 7 * (2520 * 768 * 2 + 2520 * 16) == 654_373_440


def test_tower_and_encoder_profile_per_pipeline_stage():
    # Qwen2.5-VL-7B at PP 2 on H100s. Every stage builds the whole wrapper model (make_layers splits only the
    # decoder layers); interfaces.py _mark_tower_model (0.33.0) skips the tower on stages after the first under
    # Model Runner V2, which profiles the encoder on the first stage only (gpu/model_runner.py profile_run);
    # V1 builds it and profiles it on every stage. The tower: 676,550,144 parameters x 2 B = 1,353,100,288 B.
    tower = 676_550_144 * 2
    v2 = _plan("Qwen/Qwen2.5-VL-7B-Instruct", pipeline_parallel_size=2)
    v1 = _plan("Qwen/Qwen2.5-VL-7B-Instruct", pipeline_parallel_size=2, v2_model_runner=False)
    (v2_first, v2_second), (v1_first, v1_second) = v2.stage_memories, v1.stage_memories
    assert v1_first.weights_bytes == v2_first.weights_bytes
    assert v1_second.weights_bytes - v2_second.weights_bytes == tower == 1_353_100_288
    # the encoder's held bytes: V2's first stage the 32,768-token video's outputs (32,768 x 3,584 x 2 B), its
    # second none; V1's both stages, with the inputs (32,768 x 2^2 patches x 1,176 values x 2 B)
    assert (v2_first.encoder_bytes, v2_second.encoder_bytes) == (32768 * 3584 * 2, 0)
    assert v1_first.encoder_bytes == v1_second.encoder_bytes == 32768 * 3584 * 2 + 32768 * 4 * 1176 * 2
    # every modality at 0: no stage builds it
    off = _plan("Qwen/Qwen2.5-VL-7B-Instruct", pipeline_parallel_size=2, v2_model_runner=False,
                limit_mm_per_prompt={"image": 0, "video": 0})
    assert v1_first.weights_bytes - off.stage_memories[0].weights_bytes == tower
    assert off.stage_memories[1].weights_bytes == v2_second.weights_bytes
    # --mm-encoder-tp-mode data at TP 2 under V1: each rank of both stages holds the whole tower, 1,353,100,288 -
    # 1,353,100,288 // 2 = 676,550,144 B more than the TP split
    split = _plan("Qwen/Qwen2.5-VL-7B-Instruct", pipeline_parallel_size=2, tensor_parallel_size=2,
                  v2_model_runner=False)
    data = _plan("Qwen/Qwen2.5-VL-7B-Instruct", pipeline_parallel_size=2, tensor_parallel_size=2,
                 v2_model_runner=False, mm_encoder_tp_mode="data")
    pairs = zip(data.stage_memories, split.stage_memories, strict=True)
    assert [whole.weights_bytes - part.weights_bytes for whole, part in pairs] == [676_550_144, 676_550_144]


def test_gemma4_audio_items(tmp_path):
    # A Gemma 4 with an audio tower (audio_config beside the vision one): gemma4_mm.py get_mm_max_tokens_per_item
    # gives audio the processor's audio_seq_length, 750 (transformers processing_gemma4.py Gemma4Processor's
    # default; the released processor_config.json keeps 750, as stored copies of it show, e.g. read_file id
    # 58406411679). With videos off audio (750) outranks an image (280): budget max(8,192, 750) = 8,192, items
    # min(8,192 // 750 = 10, 20 seqs x min(999, 32,768 // 750)) = 10. The dummy audio is fft_length = 512 samples
    # (_dummy_audio_num_samples): (512 + 160 - 321) // 160 + 1 = 3 mel frames, two stride-2 convolutions leave 1
    # token; held under V1: 10 x (1 x 5,376 x 2 + 3 x 128 mel bins x 2 B + a 3-frame bool mask).
    import json

    config = json.loads((Path(calibration.MODELS) / "gemma-4-31b-it.json").read_text(encoding="utf-8"))
    config["audio_config"] = {"model_type": "gemma4_audio", "hidden_size": 1024, "num_hidden_layers": 12,
                              "num_attention_heads": 8, "output_proj_dims": 1536}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    plan = calibration.vllm_plan({**Y13, "config": str(path), "limit_mm_per_prompt": {"image": 4, "video": 0}})
    assert plan.engine.encoder_cache_tokens == 8192
    assert any("10 audio item(s) of 750 tokens" in note for note in plan.notes)
    assert plan.memory.encoder_bytes == 10 * (5376 * 2 + 3 * 128 * 2 + 3) == 115_230


def _internvl(tmp_path, text_type: str):
    # the InternVL3-8B-shaped config of tests/fixtures/internvl (written for the tests: the Hub is unreachable), its
    # text model's model_type set to text_type
    import json

    config = json.loads((Path(__file__).parent / "fixtures" / "internvl" / "internvl3-8b-shape.json").read_text())
    config["llm_config"]["model_type"] = text_type
    path = tmp_path / text_type / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def test_internvl_video_follows_the_text_models_tokenizer(tmp_path):
    # internvl.py (0.33.0): a tile is (448 / 14)^2 x 0.5^2 = 256 tokens; an image at most 12 tiles and the
    # thumbnail, 13 x 256 = 3,328. ctx_video_token: a qwen2 text model's tokenizer carries <|video_pad|> (Qwen2's
    # added tokens, id 151656: stored copies, e.g. read_file id 4456779189), so video is on: frames of one tile as
    # many as 32,768 tokens hold beside one image, (32,768 - 3,328) // 256 = 115, 29,440 tokens, the larger item:
    # budget 29,440, one video, its 29,440 embeddings x 3,584 x 2 B held (V2; V1 adds 115 x 3 x 448^2 x 2 B).
    qwen = Deployment(engine="vllm", engine_version="0.33.0", gpu="h100", max_model_len=32768)
    gpu = find_gpu("h100")
    choice = GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 1, gpu.compute_capability, gpu.fp8)
    plan = plan_deployment(resolve(_internvl(tmp_path, "qwen2")), qwen, choice)
    assert plan.engine.encoder_cache_tokens == 29440
    assert any("1 video item(s) of 29,440 tokens" in note for note in plan.notes)
    assert plan.memory.encoder_bytes == 29440 * 3584 * 2 == 211_025_920
    v1 = plan_deployment(resolve(_internvl(tmp_path, "qwen3")), replace(qwen, v2_model_runner=False), choice)
    assert v1.memory.encoder_bytes == 211_025_920 + 115 * 3 * 448 * 448 * 2
    # the same config with an internlm2 text model: no video token is looked up, images only; 8,192 batched
    # tokens hold 2 of 3,328
    internlm = plan_deployment(resolve(_internvl(tmp_path, "internlm2")), qwen, choice)
    assert internlm.engine.encoder_cache_tokens == 8192
    assert internlm.memory.encoder_bytes == 2 * 3328 * 3584 * 2


def test_gemma4_tower_peak_of_a_huge_batch_in_closed_form():
    # Y13's tower (hidden 1,152, intermediate 4,304, head_dim 72, position table 10,240) on a batch of 10^6 videos
    # of 32 frames x 630 patches: 32,000,000 frames, chunks of 10 GiB // (630 x 4 x 10,240 x 8 = 206,438,400) = 52
    # frames (total 100 GiB, no free figure); 615,384 full chunks and 32 frames left. The last full chunk holds the
    # inputs, 615,383 x 52 earlier frames' hidden states (630 x 1,152 x 2 B) and 52 frames at the MLP (21,202,020 B
    # each, test_gemma4_tower_peak_by_hand): 77,737,940,577,360 B; the remainder, 615,384 x 52 hidden states and 32
    # frames, holds 77,737,592,016,000 B, less.
    from kvplan.engines.vllm.multimodal import PROCESSORS, Item

    tower = resolve(str(Path(calibration.MODELS) / "gemma-4-31b-it.json")).tower
    item = Item(2496, 32 * 64, 32 * 630 * 768, 32 * 630 * 16, 32, 630)
    batch, hidden, per_frame = 10**6, 630 * 1152 * 2, 21_202_020
    inputs = batch * (32 * 630 * 768 * 2 + 32 * 630 * 16)
    assert (100 * GiB // 10) // 206_438_400 == 52 and divmod(32 * batch, 52) == (615_384, 32)
    expected = max(inputs + 615_383 * 52 * hidden + 52 * per_frame, inputs + 615_384 * 52 * hidden + 32 * per_frame)
    gemma4 = PROCESSORS[resolve(str(Path(calibration.MODELS) / "gemma-4-31b-it.json")).architecture]
    assert gemma4.tower_peak(tower, item, batch, 2, 100 * GiB, None) == expected == 77_737_940_577_360


def test_internvl_tile_of_no_tokens_is_one_line_error(tmp_path):
    # image_size 13 under a 14-pixel patch: (13 // 14)^2 = 0 patches a tile, so no image or video token
    import json

    path = Path(_internvl(tmp_path, "qwen2"))
    config = json.loads(path.read_text(encoding="utf-8"))
    config["vision_config"]["image_size"] = 13
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(KvplanError, match="= 0 tokens"):
        _plan(str(path))
