"""Input validation shared by the numpy core, and the convention for undefined metrics.

An undefined metric (e.g. AUROC with no OOD examples, PRR where the oracle equals random)
is returned as ``nan`` *and* announced with an :class:`UndefinedMetricWarning` that says why;
row-producing functions also put the reason in a ``reason`` field. Never a silent number.
"""

from __future__ import annotations

import warnings

import numpy as np

from lm_eval_evidential.errors import InvalidValueError, UndefinedMetricWarning


def undefined(reason: str, *, stacklevel: int = 3) -> float:
    """Warn with ``reason`` and return NaN (the one way the core reports an undefined metric)."""
    warnings.warn(reason, UndefinedMetricWarning, stacklevel=stacklevel)
    return float("nan")


def as_1d_float(x, name: str) -> np.ndarray:
    """A finite 1-D float64 array, or a ValueError naming the argument and the first bad value."""
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise InvalidValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise InvalidValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidValueError(
            f"{name} contains {int(bad.sum())} non-finite value(s), first at index {i}: {arr[i]!r}; "
            "drop or repair those examples before computing metrics"
        )
    return arr


def as_binary_labels(y, name: str = "y_true") -> np.ndarray:
    """A 1-D bool array from 0/1 (or bool) labels, or a ValueError naming the offending value."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InvalidValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind not in "biuf":
        raise InvalidValueError(f"{name} must contain 0/1 labels, got dtype {arr.dtype}")
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidValueError(f"{name} must contain only 0 and 1 (1 = positive), found {arr[i]!r} at index {i}")
    return arr.astype(bool)


def check_same_length(**arrays) -> int:
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise InvalidValueError(f"inputs must have the same length, got {lengths}")
    return next(iter(lengths.values()), 0)


def first_outside_unit_interval(arr: np.ndarray) -> int | None:
    """Index of the first value outside [0, 1] (probabilities are expected), or None."""
    bad = (arr < 0.0) | (arr > 1.0)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None
