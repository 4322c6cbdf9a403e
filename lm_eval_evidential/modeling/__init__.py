"""The torch layer: evidence heads, losses, the evidential config saved with an adapter, and the
encoding (answer-token ids, left padding, last-position logits) shared by evaluation and training.
"""
