"""Pure numpy/scipy metrics: Dirichlet quantities, score functions, detection, calibration,
selective prediction, accuracy estimation, score orders and the cardinality (K) audit.

No torch, no lm_eval, no matplotlib: ``tests/contract/test_layers.py`` enforces it.
"""
