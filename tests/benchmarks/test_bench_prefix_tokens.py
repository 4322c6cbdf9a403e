"""bench_prefix_tokens on the test tokenizer: its tokenising part checks the ids it times and a sweep row names
the characters a group's cut saves (seconds, no model)."""

from __future__ import annotations

import json
import os

from tests.benchmarks.test_results_table import BENCH, _module


def test_the_tokenising_part_times_equal_ids_and_the_sweep_counts_saved_characters(tmp_path):
    bench = _module("bench_prefix_tokens")
    rendered = json.loads((BENCH / "gpu_check_questions.json").read_text(encoding="utf-8"))
    backend = bench.load_tokenizer("tiny", tmp_path).backend_tokenizer
    texts = bench.contexts_of(bench.requests_from(rendered, 12, 5)[0])
    found = bench.tokenising(backend, texts, 1)
    assert found["whole"] > 0 and found["shared"] > 0 and found["ratio"] > 0
    rows = bench.sweep(backend, rendered, 1, 1)
    assert [(r["shots"], r["group"]) for r in rows] == [(1, 2), (1, 4), (1, 16), (1, 120), (2, 2), (2, 4), (2, 16),
                                                        (2, 120), (5, 2), (5, 4), (5, 16), (5, 120)]  # fmt: skip
    # a group of n saves (n - 1) cuts less the first prompt's text after the cut: 4 save 2 cuts more than 2, the cut
    # being before "Question" of the first question (each prompt behind its group's line and the 1-shot block)
    one_shot = bench.contexts_of(bench.requests_from(rendered, 120, 1)[0])
    cut = len("Group 0.\n\n") + os.path.commonprefix(one_shot).rindex("\nQuestion") + 1
    assert rows[1]["saved_chars"] - rows[0]["saved_chars"] == 2 * cut
