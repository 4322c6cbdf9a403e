"""One scoring for every backend, by inheritance: the backends define only loading and the forward
pass, and a third backend is one small class (here: one unbatched transformers forward per prompt)
whose records equal the transformers backend's."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest
import torch
from lm_eval.api.model import LM

from lm_eval_evidential.harness import scoring
from lm_eval_evidential.harness.scoring import EvidentialScoring

from .test_model import evaluate, make_lm

pytestmark = pytest.mark.usefixtures("use_mirror")

HARNESS = Path(scoring.__file__).parent
#: What a backend may define of the scoring's names: the abstract forward and dtype, and the records'
#: producer keys extended through super() (vLLM's backend and adapter mode).
# member_pass: how a backend switches to member m (ensembles, MC dropout); the base refuses members by default.
BACKEND_OWN = {"last_logits_at", "records_dtype", "records_meta", "MODEL_NAME", "member_pass"}
BACKENDS = {"model.py": "EvidentialLM", "vllm_model.py": "EvidentialVLLM"}


def scoring_names() -> set[str]:
    return {name for name in vars(EvidentialScoring) if not (name.startswith("__") or name.startswith("_abc"))}


def backend_class(module: str, name: str) -> ast.ClassDef:
    """The backend's class as written (the vLLM module cannot be imported without vLLM)."""
    tree = ast.parse((HARNESS / module).read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


@pytest.mark.parametrize("module, name", BACKENDS.items())
def test_each_backend_inherits_the_scoring_and_defines_only_loading_and_forward(module, name):
    cls = backend_class(module, name)
    assert [ast.unparse(b) for b in cls.bases][0] == "EvidentialScoring", "the scoring must come first in the MRO"
    defined = {
        target.id if isinstance(target, ast.Name) else target.name
        for node in cls.body
        for target in (node.targets if isinstance(node, ast.Assign) else [node])
        if isinstance(target, (ast.Name, ast.FunctionDef))
    }
    assert defined & scoring_names() <= BACKEND_OWN
    assert not cls.decorator_list  # no class decorator that adds attributes
    source = (HARNESS / module).read_text(encoding="utf-8")
    assert "__dict__" not in source and "setattr(cls" not in source  # no attribute copying


def test_the_transformers_backend_takes_every_scoring_function_from_the_base():
    from lm_eval_evidential.harness.model import EvidentialLM

    assert EvidentialLM.__mro__[1] is EvidentialScoring
    for name in scoring_names() - BACKEND_OWN:
        assert name not in vars(EvidentialLM), name
        assert inspect.getattr_static(EvidentialLM, name) is inspect.getattr_static(EvidentialScoring, name), name
    assert EvidentialScoring.__abstractmethods__ == {"last_logits_at", "records_dtype"}


class PlainTransformersLM(EvidentialScoring, LM):
    """A third backend: loading, and the forward as one unpadded transformers call per prompt."""

    def __init__(self, pretrained, **model_args):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        super().__init__()
        self.init_scoring(model_args, pretrained=pretrained, peft=None, revision="main")
        self.tokenizer = AutoTokenizer.from_pretrained(pretrained)
        self.model = AutoModelForCausalLM.from_pretrained(pretrained, dtype=torch.float32).eval()
        self._config = self.model.config
        self.prefix_token_id, self.add_bos_token, self.max_length = self.tokenizer.bos_token_id, None, 2048

    def tok_encode(self, string: str) -> list[int]:
        return self.tokenizer(string)["input_ids"]  # the tiny tokenizer's own special tokens, as HFLM's default

    def last_logits_at(self, prompts, ids, disable_tqdm=False):
        rows = []
        with torch.inference_mode():
            for prompt, wanted in zip(prompts, ids):
                last = self.model(torch.tensor([prompt])).logits[0, -1]
                rows.append(last[wanted % last.shape[0]])
        return torch.stack(rows).float()

    def records_dtype(self) -> str:
        return "float32"


@pytest.mark.parametrize("method", ["edl", "ib_edl"])
def test_a_third_backend_is_loading_and_a_forward_and_gives_the_same_records(tiny_model, method):
    plain = PlainTransformersLM(str(tiny_model), method=method)
    assert not plain.__abstractmethods__
    tasks = ["obqa_edl", "csqa_edl"]
    _, ours = evaluate(plain, tasks, limit=6)
    _, hf = evaluate(make_lm(tiny_model, method=method, batch_size=4), tasks, limit=6)
    for task in tasks:
        a, b = ours[task], hf[task]
        assert [r["doc_id"] for r in a] == [r["doc_id"] for r in b]
        for field in ("logits", "alpha", "phantom_logits"):
            np.testing.assert_allclose(
                np.array([r[field] for r in a], dtype=float), np.array([r[field] for r in b], dtype=float), atol=1e-5
            )
        assert [r["pred"] for r in a] == [r["pred"] for r in b]


def test_negative_ids_count_from_the_last_row_of_the_output_layer(tiny_model):
    lm = make_lm(tiny_model, batch_size=2)
    prompts = [[5, 6, 7], [5, 6], [8, 9, 10, 11]]
    vocab = lm.model.get_output_embeddings().weight.shape[0]
    got = lm.last_logits_at(prompts, torch.tensor([[3, -1, -2]] * 3))
    full = torch.stack([lm._last_logits([p])[0] for p in prompts]).float()
    torch.testing.assert_close(got, full[:, [3, vocab - 1, vocab - 2]], atol=1e-5, rtol=0)  # asked order, any batch
