"""Pure numpy core: Dirichlet quantities, score functions, detection/calibration metrics, K audit.

Nothing here imports torch or lm_eval.
"""
