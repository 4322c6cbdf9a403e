"""LoRA fine-tuning as a K-class evidential classifier (``lm-eval-evidential train``)."""
