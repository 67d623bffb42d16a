"""sqlnb's scikit-learn estimators against scikit-learn's, fit + predict_proba in one process.

    python benchmarks/estimators.py                      # digits, and 1M x 20 numpy rows
    python benchmarks/estimators.py --rows 200000 --repeat 5

Two workloads: scikit-learn's digits (1,797 x 64, 10 classes), where fixed
per-call costs dominate, and ``--rows`` x 20 synthetic numpy rows (3 Gaussian classes;
MultinomialNB reads their absolute values), where the scan does. Each cell is the median /
min wall seconds of ``--repeat`` runs of ``fit(X, y)`` then ``predict_proba(X)`` on a
fresh estimator. For sqlnb the time is then split where it goes (medians): the input as
Arrow (``data.array_to_arrow``), :func:`sqlnb.fit` or, for count models on an array,
``counts.fit`` (their aggregate queries), building and rendering the scoring SELECT (once
per fitted model: sqlglot; for count models once per shape), and DuckDB running it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from collections import defaultdict

import numpy as np
from sklearn import naive_bayes as sk
from sklearn.datasets import load_digits

from sqlnb import estimators as est
from sqlnb.estimators import base, counts, data, moments, naive_bayes

PAIRS = {"GaussianNB": (est.GaussianNB, sk.GaussianNB), "MultinomialNB": (est.MultinomialNB, sk.MultinomialNB),
         "ComplementNB": (est.ComplementNB, sk.ComplementNB), "BernoulliNB": (est.BernoulliNB, sk.BernoulliNB)}

PHASES: dict[str, list[float]] = defaultdict(lambda: [0.0])


def _timed(module, name: str, phase: str) -> None:
    """Wrap ``module.name`` so that each call adds its wall time to ``PHASES[phase]``."""
    fn = getattr(module, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            PHASES[phase][-1] += time.perf_counter() - t0

    setattr(module, name, wrapper)


FIT, BUILT = "sqlnb.fit / counts.fit / moments.fit (aggregate queries)", "scoring SELECT built + rendered"
_timed(data, "array_to_arrow", "input as Arrow")
_timed(naive_bayes.api, "fit", FIT)
_timed(counts, "fit", FIT)  # count models on an array (sqlnb/estimators/counts.py)
_timed(base, "_scoring_text", BUILT)
_timed(counts, "_score_text", BUILT)  # once per shape: 0 after the warm-up run
_timed(moments, "fit", FIT)  # GaussianNB on a small array (sqlnb/estimators/moments.py)
_timed(moments, "_score_text", BUILT)


CPU: dict[str, list[float]] = defaultdict(list)


def run_once(make, X, y, who: str = "") -> float:
    """Wall seconds of one fit + predict_proba; its CPU seconds (every thread of the
    process: DuckDB's and BLAS's) go to ``CPU[who]``, a figure the load of a shared
    machine moves less than the wall time."""
    t0, c0 = time.perf_counter(), time.process_time()
    make().fit(X, y).predict_proba(X)
    CPU[who].append(time.process_time() - c0)
    return time.perf_counter() - t0


def measure(name: str, X: np.ndarray, y: np.ndarray, repeat: int, params: dict) -> dict:
    ours_cls, theirs_cls = PAIRS[name]
    ours, theirs, phases = [], [], defaultdict(list)
    for _ in range(repeat):
        for p in ("input as Arrow", FIT, BUILT):
            PHASES[p].append(0.0)
        t = run_once(lambda: ours_cls(**params), X, y, "ours")
        ours.append(t)
        named = 0.0
        for p in ("input as Arrow", FIT, BUILT):
            phases[p].append(PHASES[p][-1])
            named += PHASES[p][-1]
        phases["DuckDB scoring run + checks"].append(t - named)
        theirs.append(run_once(lambda: theirs_cls(**params), X, y, "theirs"))
    cpu = {k: statistics.median(CPU.pop(k)[-repeat:]) for k in ("ours", "theirs")}
    return {"ours": ours, "theirs": theirs, "cpu": cpu,
            "phases": {k: statistics.median(v) for k, v in phases.items()}}


def cell(times: list[float]) -> str:
    return f"{statistics.median(times):.3f} / {min(times):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the large workload (0: skip it)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["GaussianNB", "MultinomialNB", "ComplementNB"], choices=list(PAIRS))
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    Xd, yd = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    workloads = [("digits 1,797 x 64", Xd, yd)]
    if args.rows:
        yl = rng.integers(0, 3, size=args.rows)
        Xl = rng.normal(size=(args.rows, 20)) + yl[:, None] * np.linspace(0.1, 1.0, 20)
        workloads.append((f"{args.rows:,} x 20", Xl, yl))

    print(f"load average at start: {os.getloadavg()[0]:.2f}  (repeat {args.repeat}; wall seconds median / min)\n")
    print("| data | estimator | sqlnb fit + predict_proba | scikit-learn | ratio (medians) "
          "| CPU s, sqlnb / scikit-learn (ratio) |")
    print("|---|---|---|---|---|---|")
    breakdowns = []
    for label, X, y in workloads:
        for name in args.models:
            Xm = np.abs(X) if name != "GaussianNB" else X
            run_once(lambda: PAIRS[name][0](), Xm[:200], y[:200])  # warm: imports, the connection
            r = measure(name, Xm, y, args.repeat, {})
            ratio = statistics.median(r["ours"]) / statistics.median(r["theirs"])
            c = r["cpu"]
            print(f"| {label} | {name} | {cell(r['ours'])} | {cell(r['theirs'])} | {ratio:.1f}x | "
                  f"{c['ours']:.3f} / {c['theirs']:.3f} ({c['ours'] / c['theirs']:.1f}x) |")
            breakdowns.append((label, name, r["phases"]))
    print("\nWhere sqlnb's time goes (median seconds per fit + predict_proba):\n")
    print("| data | estimator | " + " | ".join(breakdowns[0][2]) + " |")
    print("|---|---|" + "---|" * len(breakdowns[0][2]))
    for label, name, phases in breakdowns:
        print(f"| {label} | {name} | " + " | ".join(f"{v:.3f}" for v in phases.values()) + " |")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
