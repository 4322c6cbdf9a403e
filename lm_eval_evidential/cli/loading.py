"""How an audit subcommand reads its records: one run via the one loader, said on stderr, permuted runs through
the one rule (``--average-orders``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def say_reading(command: str, tasks: Sequence[str]) -> None:
    """The first stderr line of an audit that can run long (``ood``, ``report``), said before the records are
    read: reading millions of them takes longer than a user waits for a sign of life."""
    print(f"{command}: reading the records of {', '.join(tasks)}", file=sys.stderr, flush=True)


def load(args, tasks: Sequence[str], *, orders: bool = True) -> list:
    """The records of ``tasks`` (in that order, repeats allowed) from one run, via the one loader.

    Says on stderr which run was read and any producer difference ``--allow-fingerprint-mismatch``
    let through; a refused mismatch raises FingerprintMismatchError (exit status 2). A permuted
    run goes through the one rule of :func:`~lm_eval_evidential.records.orders.records_for_audit`
    (every audit but ``permutations``; ``orders=False`` leaves it to the caller, as ``report`` does):
    refused (exit status 2) unless ``--average-orders``, which averages each question's orders
    into one record and says so on stderr.
    """
    from lm_eval_evidential.records.loading import load_run

    run = load_run(
        args.output_path, list(tasks), run=args.run, allow_fingerprint_mismatch=args.allow_fingerprint_mismatch
    )
    print(run.describe(), file=sys.stderr)
    for line in run.fingerprint_warnings:
        print(f"warning: fingerprint differs: {line}", file=sys.stderr)
    records = [run[t] for t in tasks]
    if orders and args.command != "permutations":
        records = audit_orders(args, records)
    return records


def audit_orders(args, records: list) -> list:
    """``records`` through the one rule for permuted runs (``--average-orders``), re-marked as checked
    together and each averaged task said on stderr (the mark of order-averaged numbers)."""
    from lm_eval_evidential.records.orders import ORDER_AVERAGED, records_for_audit
    from lm_eval_evidential.records.provenance import checked_together

    out = records_for_audit(
        records,
        command=args.command,
        average=getattr(args, "average_orders", False),
        compared=getattr(args, "id_task", None) is not None,
        run_flag=hasattr(args, "run"),  # compare reads several folders and has no --run
    )
    if all(a is b for a, b in zip(out, records)):
        return records
    for r in {r.task: r for r in out if ORDER_AVERAGED in r.meta}.values():
        said = r.meta[ORDER_AVERAGED]
        low, high = said["orders_per_question"]
        print(
            f"note: {r.task}: each question's {low if low == high else f'{low}-{high}'} answer orders "
            f"({said['permutations']}) averaged into one record ({said['records']} records -> {len(r)} questions; "
            "--average-orders): the numbers below are of the order-averaged predictions",
            file=sys.stderr,
        )
    return checked_together(out, allow=args.allow_fingerprint_mismatch)[0]
