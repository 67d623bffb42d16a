"""Variants of TAN on adult tried for issue 30's acceptance point 2 (error on the 15,060
complete test rows at most 13.3 %; TAN with backward wrapper selection on MDL bins gives
13.57 %). Not run by the tests and shown on no page: the figures are in the session's
report; this script reproduces them.

Every model is fitted on adult.data (32,561 rows, or its 30,162 complete rows where named)
and measured on the complete rows of adult.test. Where a variant has a free choice
(α, the bins), the choice is made by 10-fold cross-validation on adult.data (seed 0) and
the CV error is printed beside the test error, so no choice is read off the test rows.

Run from the repository root, naming the groups to run::

    PYTHONPATH=. python docs/adult_variants.py alpha est complete cat quant mixed selcat selalpha selall
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
warnings.simplefilter("ignore")

import sqlnb  # noqa: E402
from sqlnb.workflows.evaluate import evaluate  # noqa: E402
from support import shared_data as sd  # noqa: E402

AS_CATEGORIES = {c: "categorical" for c in ("age", "education-num", "hours-per-week", "capital-gain", "capital-loss")}


def main(which: list[str]) -> None:
    con = duckdb.connect()
    train = sqlnb.Query(sd.render(sd.adult_train_query()))
    train_complete = sqlnb.Query(sd.render(sd.adult_train_query(drop_missing=True)))
    test = sqlnb.Query(sd.render(sd.adult_test_query(drop_missing=True)))
    start = time.perf_counter()

    def show(name, model, extra=""):
        error = 100 * (1 - evaluate(model, test, con=con).accuracy)
        print(f"{name}: test error {error:.2f} % {extra}", flush=True)

    def cv_error(**options) -> str:
        r = sqlnb.cross_validate(train, "income", con=con, folds=10, seed=0, refit=False, **options)
        return f"(10-fold CV error {100 * (1 - r.results[0]['mean_accuracy']):.2f} %)"

    if "alpha" in which:  # α of TAN on MDL bins
        for a in (0.01, 0.1, 0.5, 1.0, 2.0, 5.0):
            show(f"TAN mdl alpha={a}", sqlnb.fit(train, "income", con=con, bins="mdl", structure="tan", alpha=a),
                 cv_error(bins="mdl", structure="tan", alpha=a))
    if "est" in which:  # the estimator (posterior mean, MAP, MLE)
        base = sqlnb.fit(train, "income", con=con, bins="mdl", structure="tan")
        for e in ("posterior-mean", "map", "mle"):
            show(f"TAN mdl estimator={e}", base.with_params(estimator=e))
    if "complete" in which:  # trained without the rows holding '?' (as adult.names' runs)
        show("TAN mdl trained on complete rows", sqlnb.fit(train_complete, "income", con=con, bins="mdl",
                                                           structure="tan"))
    if "cat" in which:  # numeric columns read as categories (fnlwgt MDL-binned)
        show("TAN numeric-as-categorical", sqlnb.fit(train, "income", con=con, feature_kinds=AS_CATEGORIES,
                                                     bins="mdl", structure="tan"),
             cv_error(feature_kinds=AS_CATEGORIES, bins="mdl", structure="tan"))
    if "quant" in which:  # equal-frequency bins instead of MDL
        for k in (5, 10, 20):
            show(f"TAN quantile:{k}", sqlnb.fit(train, "income", con=con, bins=f"quantile:{k}", structure="tan"),
                 cv_error(bins=f"quantile:{k}", structure="tan"))
    if "mixed" in which:
        bins = {"capital-gain": "mdl", "capital-loss": "mdl", None: "quantile:10"}
        show("TAN capital-* mdl, others quantile:10", sqlnb.fit(train, "income", con=con, bins=bins,
                                                                structure="tan"),
             cv_error(bins=bins, structure="tan"))
    if "selcat" in which:  # TAN wrapper selection over numeric-as-categorical columns
        for d in ("backward", "forward"):
            s = sqlnb.select_features(train, "income", con=con, direction=d, folds=10, seed=0,
                                      feature_kinds=AS_CATEGORIES, bins="mdl", structure="tan")
            show(f"TAN select {d} numeric-as-categorical", s.model,
                 f"(CV {100 * s.path[s.chosen]['error']:.2f} %, {s.features})")
    if "selalpha" in which:  # TAN backward selection at the other α CV ties with α = 1
        s = sqlnb.select_features(train, "income", con=con, direction="backward", folds=10, seed=0, bins="mdl",
                                  structure="tan", alpha=2.0)
        show("TAN select backward mdl alpha=2", s.model, f"(CV {100 * s.path[s.chosen]['error']:.2f} %, {s.features})")
    if "selall" in which:  # walk the whole backward path and take its best subset
        s = sqlnb.select_features(train, "income", con=con, direction="backward", folds=10, seed=0, bins="mdl",
                                  structure="tan", until_all=True)
        show("TAN select backward mdl until_all", s.model, f"(CV {100 * s.path[s.chosen]['error']:.2f} %, {s.features})")
    print(f"seconds {time.perf_counter() - start:.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
