"""What one lm_eval evaluation adds to the harness's results: records, evidential metrics, sample fields.

:func:`complete` runs once per ``lm_eval.evaluator.evaluate()`` call, on every rank, right after
it returns (:mod:`lm_eval_evidential.integration.hooks` wraps ``evaluate``). It is the one place
where records are built, for this package's tasks and stock multiple-choice tasks alike:

- with ``--model evidential``, from the evidence the model filed per (task, doc) in its
  ledger (see :mod:`lm_eval_evidential.integration.evidence`), for every multiple-choice task;
- with any other model (``--model hf`` …), for this package's tasks only, from the harness's
  own ``(log p, is_greedy)`` responses: ``method=softmax`` records (the softmax of the answer
  log-likelihoods equals the softmax of the answer logits; they differ by a constant).

It then adds to the results, on rank 0: each EDL task's calibration metrics and mean vacuity
and each ID/OOD pair's detection metrics, computed from those records by the same functions
the audit commands use (so the harness table and ``lm-eval-evidential calibration``/``ood``
agree exactly); the evidence of each logged sample (``--log_samples``) as JSON fields; and the
records themselves as ``results.records`` (:class:`EvidentialResults`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.records.provenance import sha256_text
from lm_eval_evidential.tasks.permutations import ORDER_FIELD as PERMUTATION_FIELD
from lm_eval_evidential.tasks.permutations import QUESTION_FIELD

logger = logging.getLogger(__name__)

# What records produced from log-likelihoods alone (no evidential model) say about their producer.
SOFTMAX_META = {"method": "softmax", "prior_weight": 1.0, "model": "non-evidential (log-likelihoods)"}


class EvidentialResults(dict):
    """lm_eval's results dict, plus ``records``: ``{task: Records}`` built from this evaluation.

    It is a plain ``dict`` to every consumer (JSON, W&B, ``make_table``); the records ride on
    the object, not in its keys, so nothing else of the results changes.
    """

    records: dict


def evaluated_tasks(task_dict: Mapping) -> dict[str, Any]:
    """``{name: Task}`` of an ``evaluate()`` task dict (``TaskManager.load`` format)."""
    tasks = task_dict.get("tasks") if isinstance(task_dict, Mapping) else None
    return dict(tasks) if isinstance(tasks, Mapping) else {}


def complete(
    lm,
    task_dict,
    results,
    *,
    apply_chat_template=False,
    system_instruction=None,
    fewshot_as_multiturn=False,
    samples=None,
    limit=None,
):
    """Build this evaluation's records and add them and their metrics to ``results`` (see module docstring).

    Called on every rank (it gathers across them); returns ``results`` unchanged on other ranks.
    ``samples`` is ``evaluate()``'s (``--samples``): lm_eval then numbers the chosen docs 0, 1, …
    in dataset order, and the records keep each question's own index in the dataset instead.
    ``limit`` is ``--limit`` (None: every question), kept in each task's records metadata so a
    report built from them says that it covers a subset.
    """
    from lm_eval_evidential.integration.evidence import EvidenceLedger

    ledger = getattr(lm, "evidence", None)
    questions = ledger.take() if isinstance(ledger, EvidenceLedger) else None
    tasks = {name: task for name, task in evaluated_tasks(task_dict).items() if _wants_records(task, questions)}
    chosen = {name: chosen_docs(samples, name) for name in tasks}  # once per task: it may warn
    rows = {
        name: task_rows(name, task, questions, _prior_weight(lm, questions), chosen[name])
        for name, task in tasks.items()
    }
    if tasks and getattr(lm, "world_size", 1) > 1:  # every rank evaluates the same tasks
        gathered = lm.gather_object(rows, dst=0)
        if results is None:
            return results
        rows = {name: [row for part in gathered for row in part[name]] for name in rows}
    if results is None or not tasks:
        return results
    prompting = prompting_meta(lm, apply_chat_template, system_instruction, fewshot_as_multiturn)
    model_meta = lm.records_meta() if questions is not None else dict(SOFTMAX_META)
    records = {}
    for name, task in tasks.items():
        meta = {
            **model_meta,
            **task_meta(task, questions, name),
            **prompting,
            "num_fewshot": task.get_config("num_fewshot") or 0,
            "limit": limit,
        }
        records[name] = _records_from_rows(rows[name], name, meta)
        add_metrics(results, name, task, records[name])
        add_sample_evidence(results, name, records[name], chosen[name])
    out = EvidentialResults(results)
    out.records = {name: rec for name, rec in records.items() if getattr(tasks[name], "WRITES_RECORDS", True)}
    return out


def check_tasks(lm, task_dict) -> None:
    """Refuse, before any forward pass, every task whose records could not be built after it, in one message.

    A task with several gold answers per question (lm_eval's ``multiple_target``, read from its
    first doc) has no single correct class for the K-class classifier that records describe; a
    stock multiple-choice task asked by answer text (its first doc's choices are not single tokens
    for this model's tokenizer, or are K different contexts) is named with its lettered view
    (:func:`lm_eval_evidential.tasks.stock.unscorable_stock_tasks`).
    """
    from lm_eval_evidential.integration.evidence import EvidenceLedger
    from lm_eval_evidential.tasks.stock import unscorable_stock_tasks

    if not isinstance(getattr(lm, "evidence", None), EvidenceLedger):
        return
    tasks = evaluated_tasks(task_dict)
    problems = [
        f"task {name!r}: its questions have several gold answers (doc_to_target gives a list), but "
        "evidential records need exactly one correct choice per question; evaluate it with "
        "--model hf, or give it a doc_to_target with one answer"
        for name, task in tasks.items()
        if _wants_records(task, True) and getattr(task, "multiple_target", 0)
    ]
    refused = unscorable_stock_tasks(lm, {n: t for n, t in tasks.items() if not getattr(t, "multiple_target", 0)})
    problems += list(refused.values())
    problems += unpermutable_stock_tasks(tasks)
    if len(problems) == 1:
        raise EvidentialInputError(problems[0])
    if problems:
        views = ",".join(f"{name}_edl" for name in refused)
        hint = f" (the lettered views: --tasks {views})" if refused else ""
        raise EvidentialInputError(
            f"--model evidential cannot score {len(problems)} of the {len(tasks)} tasks{hint}: " + "; ".join(problems)
        )


def unpermutable_stock_tasks(tasks: Mapping[str, Any]) -> list[str]:
    """Why each stock task asked for permuted evaluation (``metadata.permutations``, e.g. from ``--metadata``)
    cannot have it: a stock task that this package scores as it is (its choices already the letters,
    ``mmlu_*``) writes its options into the prompt with its own template (``doc_to_text``), whose text
    this package does not take apart, so its questions would be scored in one order under a run that
    asked for several; the orders are those of this package's tasks (:mod:`.permutations`)."""
    from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask
    from lm_eval_evidential.tasks.permutations import METADATA_KEY

    out = []
    for name, task in tasks.items():
        spec = (getattr(getattr(task, "config", None), "metadata", None) or {}).get(METADATA_KEY)
        if spec is None or isinstance(task, EvidentialMCQATask) or not _wants_records(task, True):
            continue
        out.append(
            f"task {name!r}: metadata.permutations ({spec!r}) asks for each question in several orders, but {name} is "
            "a stock task whose own template (doc_to_text) writes its lettered options, which this package does not "
            "reorder (it permutes its own *_edl tasks, the K-matched controls and the lettered views of stock tasks "
            f"that ask by answer text); evaluate {name} in a run without permutations"
        )
    return out


def check_requests(lm, task_dict, samples) -> None:
    """Refuse, before any question is scored, ``--samples`` ids beyond a task's docs and a ``--num_fewshot``
    beyond its few-shot docs, naming the task, the value and the largest that works (lm_eval would fail
    with an IndexError or "Sample larger than population" traceback, or silently score fewer docs)."""
    from lm_eval_evidential.integration.evidence import EvidenceLedger

    if not isinstance(getattr(lm, "evidence", None), EvidenceLedger):
        return
    check_request_ranges(task_dict, samples)


def _shots(task, num_fewshot) -> int:
    """The few-shot count ``simple_evaluate`` gives ``task`` for ``--num_fewshot`` (None: not given): the
    task's own where it is 0 (lm_eval then ignores the flag) or the flag is absent, else the flag."""
    own = task.get_config("num_fewshot")
    return int(num_fewshot) if num_fewshot is not None and own != 0 else int(own or 0)


def check_request_ranges(task_dict, samples, num_fewshot=None) -> None:
    """The checks of :func:`check_requests` on a ``TaskManager.load`` task dict, for any model.

    ``num_fewshot`` is ``simple_evaluate``'s ``--num_fewshot`` when the tasks do not carry it yet (the
    check before the weights load, ``harness.plugin``); None reads each task's own setting.
    """
    tasks = evaluated_tasks(task_dict)
    for name, ids in (samples or {}).items():
        if name not in tasks:
            continue
        n = len(tasks[name].eval_docs)
        beyond = [i for i in ids if isinstance(i, int) and i >= n]
        if beyond:
            raise EvidentialInputError(
                f"--samples: task {name!r} has {n} docs (ids 0..{n - 1}), not doc {beyond[0]}; give ids below {n}"
            )
    for name, task in tasks.items():
        shots = _shots(task, num_fewshot)
        if not shots:
            continue
        pool, split = _fewshot_pool(task)
        if pool is None:
            continue
        room = len(pool) - (1 if split == getattr(task, "eval_split", None) else 0)
        if shots > room:
            raise EvidentialInputError(
                f"task {name!r}: --num_fewshot {shots} but its few-shot split {split!r} has {room} usable examples; "
                f"give --num_fewshot {room} or fewer"
            )


def _fewshot_pool(task):
    """(the docs few-shot examples are drawn from, their split) of ``task``, or (None, None) where unknown."""
    pool = getattr(task, "fewshot_pool", None)
    if callable(pool):  # this package's tasks: their own split, never the evaluated one
        return pool(), getattr(task, "fewshot_split", None)
    try:
        docs = task.fewshot_docs()
    except Exception:  # noqa: BLE001 - lm_eval's own sampler says what is wrong
        return None, None
    split = getattr(getattr(task, "config", None), "fewshot_split", None) or getattr(task, "eval_split", None)
    return (None, None) if docs is None else (list(docs), split)


# The harness's multiple-choice metrics that rank choices by log-likelihood per character or byte.
LENGTH_NORMALISED = ("acc_norm", "acc_bytes")


def align_length_normalised_metrics(lm, task_dict) -> list[str]:
    """Under ``--model evidential``, ``acc_norm`` and ``acc_bytes`` become the argmax accuracy; the tasks changed.

    The harness computes ``acc_norm`` as the argmax of log E[p_j] divided by choice j's length in
    characters (``acc_bytes``: bytes). For a K-class classifier over answer labels the lengths are
    the labels' lengths, which carry no information: dividing by them changes which choice wins
    (a negative log-probability over a longer label looks better), so the table's ``acc_norm``
    could disagree with the records (0.5 against the records' argmax accuracy of 0.3 on
    leaderboard_bbh_boolean_expressions). Each multiple-choice task's per-question results are
    therefore given the argmax accuracy under those names, so the table, its groups and the
    logged samples agree with the records' ``correct``.
    """
    from lm_eval_evidential.integration.evidence import EvidenceLedger

    if not isinstance(getattr(lm, "evidence", None), EvidenceLedger):
        return []
    changed = []
    for name, task in evaluated_tasks(task_dict).items():
        if getattr(task, "OUTPUT_TYPE", None) != "multiple_choice" or getattr(task.process_results, "_aligned", False):
            continue
        if not set(LENGTH_NORMALISED) & set(getattr(task, "_metric_fn_list", {})):
            continue
        task.process_results = _argmax_accuracy_as_length_normalised(task, name, task.process_results)
        changed.append(name)
    return changed


def _argmax_accuracy_as_length_normalised(task, name, process_results):
    def aligned(doc, results):
        out = process_results(doc, results)
        names = [m for m in LENGTH_NORMALISED if m in out]
        if names:
            if "acc" in out:
                accuracy = out["acc"]
            else:
                n = len(task.doc_to_choice(doc))
                scores = [float(r[0]) for r in results[:n]]
                gold = gold_index(task, name, -1, doc, n)
                accuracy = float(max(range(n), key=lambda j: (scores[j], -j)) == gold)
            out.update(dict.fromkeys(names, accuracy))
        return out

    aligned._aligned = True
    return aligned


def _records_from_rows(rows, name, meta):
    from lm_eval_evidential.records import Records

    return Records.from_rows(rows, task=name, meta=meta)


def _wants_records(task, questions) -> bool:
    from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask

    if isinstance(task, EvidentialMCQATask):
        return True
    return questions is not None and getattr(task, "OUTPUT_TYPE", None) == "multiple_choice"


def _prior_weight(lm, questions) -> float:
    return float(lm.head.prior_weight) if questions is not None else 1.0


def gold_index(task, name: str, doc_id: int, doc, n_choices: int) -> int:
    """The index of the correct choice, by the harness's own rules (an index, or a choice's text)."""

    target = task.doc_to_target(doc)
    if isinstance(target, str):
        choices = list(task.doc_to_choice(doc))
        target = choices.index(target) if target in choices else target
    if hasattr(target, "item"):
        target = target.item()
    if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < n_choices:
        raise EvidentialInputError(
            f"task {name!r} doc {doc_id}: target {target!r} is not one of the {n_choices} choices' indices; "
            "records need exactly one correct choice per question (tasks with several gold answers are not supported)"
        )
    return target


def chosen_docs(samples, name: str) -> list[int] | None:
    """``--samples`` for task ``name`` as given, duplicates dropped (None without ``--samples``)."""
    chosen = (samples or {}).get(name)
    if not chosen:
        return None
    chosen = [int(i) for i in dict.fromkeys(chosen)]
    if chosen != sorted(chosen):
        logger.warning(
            "%s: --samples %s is evaluated in dataset order, but lm_eval logs the i-th doc as the i-th index "
            "given, so logged samples' doc_id do not name their docs; the records carry each doc's dataset "
            "index. Give the indices sorted to avoid this.",
            name,
            chosen,
        )
    return chosen


def task_rows(name: str, task, questions, prior_weight: float, chosen: list[int] | None = None) -> list[dict]:
    """One record row per question of ``task`` that this rank evaluated (built together, :func:`make_records`).

    Under ``--samples`` (``chosen``) lm_eval numbers the chosen docs 0, 1, … in dataset order; each
    row keeps the doc's own dataset index.
    """
    ids = None if chosen is None else sorted(chosen)
    from lm_eval_evidential.records import make_records

    by_doc = defaultdict(list)
    for request in task.instances:
        by_doc[request.doc_id].append(request)
    doc_ids, labels, golds, logits, alphas, phantoms, members = sorted(by_doc), [], [], [], [], [], []
    member_phantoms = []
    record_ids, orders = [], []  # a permuted task's records: each doc's question and order (tasks/permutations.py)
    for doc_id in doc_ids:
        requests = sorted(by_doc[doc_id], key=lambda r: r.idx)
        continuations = [r.args[1] for r in requests]
        doc = requests[0].doc
        if isinstance(doc, dict) and PERMUTATION_FIELD in doc:
            record_ids.append(int(doc[QUESTION_FIELD]))
            orders.append([int(i) for i in doc[PERMUTATION_FIELD]])
        golds.append(gold_index(task, name, doc_id, requests[0].doc, len(continuations)))
        labels.append([c.strip() for c in continuations])
        if questions is None:
            logits.append([float(r.resps[0][0]) for r in requests])
            continue
        question = questions.get((name, doc_id))
        if question is None or list(question.continuations) != continuations:
            raise RuntimeError(f"task {name!r} doc {doc_id}: the model filed no evidence for this question")
        logits.append(question.logits)
        alphas.append(question.alpha)
        phantoms.append(question.phantom_logits)
        members.append(question.member_logits)
        member_phantoms.append(question.member_phantom_logits)
    evidential = questions is not None and any(a is not None for a in alphas)
    # Ensembles, MC dropout: logits and alpha follow from the members (records.make_records).
    with_members = any(m is not None for m in members)
    optional = {"phantom_logits": phantoms} if questions is not None else {}
    if with_members:
        optional["member_logits"] = members
        optional["member_phantom_logits"] = member_phantoms
    if orders:
        if len(orders) != len(doc_ids):
            raise RuntimeError(f"task {name!r}: some docs carry a permutation and some do not")
        optional["order"] = orders
    return make_records(
        task=name,
        doc_ids=record_ids if orders else doc_ids if ids is None else [ids[d] for d in doc_ids],
        labels=labels,
        gold=golds,
        logits=None if with_members else logits,
        alpha=alphas if evidential and not with_members else None,
        prior_weight=prior_weight,
        optional=optional or None,
        members_method=("edl" if evidential else "softmax") if with_members else None,
    )


def prompting_meta(lm, apply_chat_template, system_instruction, fewshot_as_multiturn) -> dict:
    """How prompts were built, beyond the task's template: chat template, system instruction."""
    template = lm.chat_template(apply_chat_template) if apply_chat_template else None
    return {
        "chat_template_sha256": sha256_text(template),
        "system_instruction_sha256": sha256_text(system_instruction),
        "fewshot_as_multiturn": bool(fewshot_as_multiturn) if apply_chat_template else False,
    }


def task_meta(task, questions, name: str) -> dict:
    """What defines a task's records besides the model: its template, answer tokens, version, data."""
    if hasattr(task, "fingerprint"):
        meta = dict(task.fingerprint)
    else:
        config = task.config
        template = config.doc_to_text if isinstance(config.doc_to_text, str) else repr(config.doc_to_text)
        kwargs = config.dataset_kwargs or {}
        meta = {
            "prompt_template_sha256": sha256_text(template),
            "task_version": (config.metadata or {}).get("version", getattr(task, "VERSION", None)),
            "data_source": {
                "dataset": config.dataset_path,
                "configs": [config.dataset_name],
                "revision": kwargs.get("revision"),
                "files": kwargs.get("data_files"),
            },
        }
    meta["data_origin"] = (
        "local files" if (meta["data_source"] or {}).get("files") else (meta["data_source"] or {}).get("origin", "hub")
    )
    if questions is not None:
        ids = {}
        for (task_name, _), question in questions.items():
            if task_name == name:
                ids.update(zip(question.continuations, question.token_ids))
        meta["answer_token_ids"] = dict(sorted(ids.items()))
        meta.setdefault("answer_tokens", sorted(ids))
    return meta


def add_metrics(results: dict, name: str, task, records) -> None:
    """Add ``task.evidential_metrics(records)`` to the task's results row (``metric,none``)."""
    metrics = task.evidential_metrics(records) if hasattr(task, "evidential_metrics") else {}
    row = results.get("results", {}).get(name)
    if row is None:
        return
    better = results.setdefault("higher_is_better", {}).setdefault(name, {})
    for metric, (value, higher_is_better) in metrics.items():
        row[f"{metric},none"] = value
        better[metric] = higher_is_better
    if "n-samples" in results and name in results["n-samples"]:
        results["n-samples"][name]["effective"] = len(records)


def add_sample_evidence(results: dict, name: str, records, chosen: list[int] | None = None) -> None:
    """Each logged sample of ``name`` gets ``evidence``: its answer logits and alpha (JSON lists).

    Under ``--samples`` lm_eval logs the i-th doc (dataset order) with the i-th index given
    (``chosen``); the evidence attached is the logged doc's.
    """
    logged_as = None if chosen is None else dict(zip(chosen, sorted(chosen)))
    samples = (results.get("samples") or {}).get(name)
    if not samples:
        return
    if records.order is not None:  # permuted: a record is one (question, order), as each logged doc says
        position = {(int(d), tuple(records.order_of(i))): i for i, d in enumerate(records.doc_id)}
    else:
        position = {int(d): i for i, d in enumerate(records.doc_id)}
    for sample in samples:
        doc_id = int(sample["doc_id"])
        doc = sample.get("doc")
        if records.order is not None and isinstance(doc, dict) and PERMUTATION_FIELD in doc:
            i = position.get((int(doc[QUESTION_FIELD]), tuple(int(j) for j in doc[PERMUTATION_FIELD])))
        else:
            i = position.get(doc_id if logged_as is None else logged_as.get(doc_id, -1))
        if i is None:
            continue
        k = int(records.k[i])
        sample["evidence"] = {
            "logits": records.logits[i, :k].tolist(),
            "alpha": records.alpha[i, :k].tolist() if records.has_alpha else None,
        }
