"""A device memory cap on the CPU: what ``batch_size=auto`` sees on a GPU, without a GPU.

On a GPU, ``batch_size=auto`` (accelerate's ``find_executable_batch_size``, used by the
harness's ``hf`` model and by ``--model evidential``) lowers the batch size until a forward
pass stops raising "CUDA out of memory". A CPU machine has no such limit short of the whole
RAM, so :class:`MemoryCap` imposes one: while it is active, every tensor an operator creates
counts against ``limit_bytes`` until it is freed, and an operator that would exceed the limit
raises the CPU allocator's own out-of-memory error, which accelerate treats like a GPU's.
Tensors that existed before (the weights) do not count: the cap is on the activations,
logits and buffers an evaluation allocates, which is what decides the batch size on a GPU.

It is a :class:`torch.utils._python_dispatch.TorchDispatchMode` (torch's hook under every
operator); torch has per-process memory fractions for CUDA only, not for the CPU allocator.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from lm_eval_evidential.errors import InvalidValueError

__all__ = ["MemoryCap"]


class MemoryCap(TorchDispatchMode):
    """Count live bytes of tensors created inside the ``with`` block; fail past ``limit_bytes``.

    ``peak_bytes`` is the largest live total seen. The error message starts with the text
    accelerate's ``should_reduce_batch_size`` recognises ("DefaultCPUAllocator: can't
    allocate memory"), so ``find_executable_batch_size`` retries with a smaller batch.
    Storage shared by views is counted once.
    """

    def __init__(self, limit_bytes: int):
        super().__init__()
        if limit_bytes <= 0:
            raise InvalidValueError(f"limit_bytes must be > 0, got {limit_bytes!r}")
        self.limit_bytes = int(limit_bytes)
        self.live_bytes = 0
        self.peak_bytes = 0
        self._storages: dict[int, int] = {}

    def _release(self, key: int) -> None:
        self.live_bytes -= self._storages.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        # Outputs that are inputs (in-place ops, out=) or views of them allocate nothing.
        given = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        created = 0
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key == 0 or key in given or key in self._storages:
                continue
            self._storages[key] = storage.nbytes()
            created += storage.nbytes()
            weakref.finalize(t, self._release, key)
        self.live_bytes += created
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        if self.live_bytes > self.limit_bytes:
            raise RuntimeError(
                f"DefaultCPUAllocator: can't allocate memory: {func} brought the live tensors to "
                f"{self.live_bytes} bytes, over the simulated cap of {self.limit_bytes} bytes"
            )
        return out
