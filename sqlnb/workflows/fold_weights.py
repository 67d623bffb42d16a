"""Cross-validation of naive Bayes with learnt weights (:mod:`sqlnb.models.naive_bayes.weighted`).

Each fold model is naive Bayes's fold model (its counts and cut points from its training
folds, as :func:`sqlnb.workflows.cv.cross_validate` builds them for naive Bayes) with weights
fitted on the patterns of its training rows: one aggregate scan per fold model (the patterns
depend on its cut points), grouped by the outer fold too. λ, unless the grid or ``l2`` gives
it, is chosen by cross-validation over the model's training folds (nested: the held-out fold
takes no part).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from sqlglot import exp

from sqlnb.engines import as_engine
from sqlnb.models.naive_bayes import weighted
from sqlnb.source import Source
from sqlnb.workflows.folds import fold_source


def plan(con, source: Source, label: str, fold: exp.Expression, features: Sequence[str] | None,
         exclude: Sequence[str] | None, options: dict, naive_bayes_plan: Callable[[dict], Any]):
    """``(fold_model(i, params), full_model(params), fold_rows)`` of the weighted model:
    ``naive_bayes_plan(options)`` gives naive Bayes's plan over the same folds."""
    l2_given = options.pop("l2", None)
    if options.get("bins") is None:
        options["bins"] = "mdl"
    if options.get("kind", "auto") == "auto":  # booleans as categories of two values
        options["feature_kinds"] = weighted.boolean_categories(source.columns, label, None, features, exclude,
                                                               options.get("feature_kinds"))
    base = naive_bayes_plan(options)
    engine = as_engine(con)
    patterns: dict = {}

    def build(i: int | None, params: dict):
        p = dict(params)
        l2 = p.pop("l2", l2_given)
        nb = base.full_model(p) if i is None else base.fold_model(i, p)
        weighted.check_features(nb.features, nb.hyper.structure)
        if i not in patterns:  # the rows of the model, with their outer fold (the inner folds)
            rows = source if i is None else fold_source(source, fold, i, held_out=False, keep_fold=True)
            patterns[i] = weighted.read_patterns(engine, rows, label, None, nb.features, nb.stats, fold)
        report = dict(nb.report or {})
        if l2 is None:  # the full fit's rule (its note on a class of one row is the full model's)
            l2, tried = weighted.chosen_l2(nb, lambda: patterns[i])
            report.update({"l2_cv": tried} if tried is not None else {})
        beta = weighted.fit_weights(nb, patterns[i], l2)
        return weighted.WeightedNaiveBayes.from_naive_bayes(nb, l2, beta, report)

    return (lambda i, p: build(i, p)), (lambda p: build(None, p)), base.fold_rows
