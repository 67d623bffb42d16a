"""Which labels the precision, recall and F1 averages of :func:`sqlnb.workflows.evaluate.evaluate`
are over, and those averages from the confusion counts (scikit-learn's definitions)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from sqlnb.errors import SqlnbError, suggest


#: What the label averages may be over (:mod:`sqlnb.workflows.evaluate`'s docstring; scikit-learn's ``labels``).
LABELS = ("present", "model")


def check_labels(labels: str) -> str:
    """``labels`` if it is one of :data:`LABELS`, else a one-line error naming the choices."""
    if labels not in LABELS:
        raise SqlnbError(f"unknown labels {labels!r}{suggest(str(labels), LABELS)}; choose 'present' (the labels "
                         "in the rows or their predictions, as scikit-learn) or 'model' (the model's classes)")
    return labels


def label_averages(classes: Sequence, true_labels: Sequence, predicted: Sequence, matrix: Sequence[Sequence[int]],
                   labels: str = "present") -> dict:
    """Macro, weighted and micro precision, recall and F1 and the balanced accuracy, from
    the confusion counts (``matrix[i][j]``: rows labelled ``true_labels[i]`` predicted
    ``predicted[j]``; ``predicted`` holds the classes and maybe None, no prediction), over
    the labels ``labels`` names (:mod:`sqlnb.workflows.evaluate`'s docstring). scikit-learn's
    ``precision_recall_fscore_support(..., zero_division=0)`` and
    ``balanced_accuracy_score``, from the same integer counts: the divisions and means are
    the only rounding. None for every figure when no row is labelled."""
    col = {p: j for j, p in enumerate(predicted)}
    support = {y: sum(r) for y, r in zip(true_labels, matrix)}
    hits = {y: (r[col[y]] if y in col else 0) for y, r in zip(true_labels, matrix)}
    chosen = {y: sum(r[col[y]] for r in matrix) if y in col else 0 for y in true_labels}
    if labels == "model":
        over = list(classes)
    else:
        over = [y for y in true_labels if support[y] or chosen[y]]
    out: dict[str, Any] = {"averaged_labels": over}
    names = ("macro_precision", "macro_recall", "macro_f1", "weighted_precision", "weighted_recall", "weighted_f1",
             "micro_precision", "micro_recall", "micro_f1", "balanced_accuracy")
    if not sum(support.values()):
        return out | dict.fromkeys(names)

    def ratio(a: float, b: float) -> float:
        return a / b if b else 0.0  # zero_division=0

    figures = {"precision": [ratio(hits[y], chosen[y]) for y in over],
               "recall": [ratio(hits[y], support[y]) for y in over],
               "f1": [ratio(2 * hits[y], support[y] + chosen[y]) for y in over]}
    weights = [support[y] for y in over]
    for name, values in figures.items():
        out[f"macro_{name}"] = float(np.mean(values)) if values else 0.0
        out[f"weighted_{name}"] = float(np.average(values, weights=weights)) if sum(weights) else 0.0
    tp, pred, true = (sum(d[y] for y in over) for d in (hits, chosen, support))
    out |= {"micro_precision": ratio(tp, pred), "micro_recall": ratio(tp, true), "micro_f1": ratio(2 * tp, pred + true)}
    recalls = [hits[y] / support[y] for y in true_labels if support[y]]
    out["balanced_accuracy"] = float(np.mean(recalls))
    return out
