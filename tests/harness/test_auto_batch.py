"""batch_size=auto under a device memory cap: the evidential model fits a larger batch than --model hf.

The cap is simulated on the CPU (``lm_eval_evidential.testing.memory_cap.MemoryCap``): every
tensor created during the evaluation counts until freed, and going over the cap raises the
allocator's out-of-memory error, which accelerate's ``find_executable_batch_size`` (behind both
models' ``batch_size=auto``) answers by trying a smaller batch, as it does on a GPU. --model hf
keeps full-vocabulary logits (and their log-softmax) for every position of its probe batch;
the evidential model keeps the last position's logits only.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lm_eval_evidential.testing.memory_cap import MemoryCap

from .test_model import evaluate, make_lm

pytestmark = pytest.mark.usefixtures("use_mirror")

CAP = 16 << 20
MAX_BATCH = 96


def test_memory_cap_counts_live_tensors_and_raises_the_cpu_oom_accelerate_recognises():
    from accelerate.utils.memory import should_reduce_batch_size

    weights = torch.ones(1 << 20)  # made before the cap: not counted
    with MemoryCap(3 << 20) as cap:
        a = torch.ones(1 << 18)  # 1 MiB
        b = a * 2  # 1 MiB more
        view = b[:10]  # a view allocates nothing
        del a
        c = torch.ones(1 << 18)  # back to 2 MiB live
        weights.add_(1)  # in place on an outside tensor: nothing new
        assert cap.live_bytes == 2 << 20 and cap.peak_bytes == 2 << 20
        with pytest.raises(RuntimeError) as err:
            torch.ones(1 << 19)  # 2 MiB more would make 4 MiB
    assert should_reduce_batch_size(err.value)
    assert view.shape == (10,) and c.shape == (1 << 18,)


def recording_auto_sizes(lm):
    """``lm`` with the sizes its batch_size=auto settles on kept in ``lm.chosen`` (HFLM keeps its own)."""
    probe = lm._auto_batch_size
    lm.chosen = []
    lm._auto_batch_size = lambda *a, **k: lm.chosen.append(probe(*a, **k)) or lm.chosen[-1]
    return lm


def test_auto_batch_is_larger_than_hfs_under_the_same_memory_cap(tiny_model):
    from lm_eval.models.huggingface import HFLM

    ours = recording_auto_sizes(make_lm(tiny_model, batch_size="auto", max_batch_size=MAX_BATCH))
    theirs = HFLM(
        pretrained=str(tiny_model), device="cpu", dtype="float32", batch_size="auto", max_batch_size=MAX_BATCH
    )
    with MemoryCap(CAP):
        records = evaluate(ours, ["obqa_edl"], limit=16)[1]["obqa_edl"]
    with MemoryCap(CAP):
        evaluate(theirs, ["obqa_edl"], limit=16)
    (ours_size,) = ours.chosen
    (hf_size,) = theirs.batch_sizes.values()
    print(f"batch_size=auto under a {CAP >> 20} MiB cap: evidential {ours_size}, hf {hf_size}")
    assert 1 <= hf_size < ours_size < MAX_BATCH  # the cap binds both, and ours fits more
    # and the records are those of a fixed batch size
    fixed = evaluate(make_lm(tiny_model, batch_size=3), ["obqa_edl"], limit=16)[1]["obqa_edl"]
    np.testing.assert_allclose(records.alpha, fixed.alpha, atol=1e-5)
