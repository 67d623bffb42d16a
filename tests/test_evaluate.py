"""sqlnb.evaluate: metrics computed in SQL equal scikit-learn's on the same scored rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from sklearn import metrics

import sqlnb
from sqlnb.workflows.evaluate import EPS, evaluate, text_report
from support.cli import mixed_table


def scored_rows(model, data, con):
    """The rows the metrics are computed over, in Python, for the oracle."""
    t = model.score(data, con, outputs=("jll", "proba", "prediction")).to_arrow_table().to_pydict()
    P = np.array([t[c] for c in model.proba_columns()], dtype=float).T
    return t, P


def with_nulls(table: pa.Table, column: str, every: int) -> pa.Table:
    values = table[column].to_pylist()
    values = [None if i % every == 0 else v for i, v in enumerate(values)]
    return table.set_column(table.column_names.index(column), column, pa.array(values, table[column].type))


@pytest.mark.parametrize("classes", [("no", "yes"), ("a", "b", "c")])
def test_metrics_equal_scikit_learn(con, classes):
    train = mixed_table(300, seed=11, classes=classes)
    test = with_nulls(mixed_table(150, seed=12, classes=classes), "y", every=17)  # unlabelled rows
    con.register("train", train)
    con.register("test", test)
    model = sqlnb.fit("train", "y", con=con, exclude=["id"])
    ev = evaluate(model, "test", con)
    t, P = scored_rows(model, "test", con)
    labelled = np.array([y is not None for y in t["y"]])
    y = np.array(t["y"], dtype=object)[labelled]
    pred = np.array(t["prediction"], dtype=object)[labelled]
    P = P[labelled]
    assert (ev.rows, ev.labelled_rows, ev.unlabelled_rows) == (150, labelled.sum(), 150 - labelled.sum())
    assert ev.no_proba_rows == 0 and ev.unknown_label_rows == 0
    assert ev.accuracy == pytest.approx(metrics.accuracy_score(y, pred), abs=1e-15)
    assert ev.log_loss == pytest.approx(metrics.log_loss(y, P, labels=list(classes)), rel=1e-13)
    proba = P[:, 1] if len(classes) == 2 else P
    assert ev.brier == pytest.approx(metrics.brier_score_loss(y, proba, pos_label=classes[-1])
                                     if len(classes) == 2 else metrics.brier_score_loss(y, P, labels=list(classes)),
                                     rel=1e-13)
    prec, rec, f1, sup = metrics.precision_recall_fscore_support(y, pred, labels=list(classes), zero_division=0)
    np.testing.assert_allclose([m.precision for m in ev.per_class], prec, rtol=1e-15)
    np.testing.assert_allclose([m.recall for m in ev.per_class], rec, rtol=1e-15)
    np.testing.assert_allclose([m.f1 for m in ev.per_class], f1, rtol=1e-15)
    assert [m.support for m in ev.per_class] == sup.tolist()
    assert ev.macro_f1 == pytest.approx(metrics.f1_score(y, pred, average="macro"), rel=1e-14)
    assert ev.weighted_f1 == pytest.approx(metrics.f1_score(y, pred, average="weighted"), rel=1e-14)
    assert ev.confusion == metrics.confusion_matrix(y, pred, labels=list(classes)).tolist()
    assert ev.confusion_true == ev.confusion_predicted == list(classes)
    if len(classes) == 2:
        log_odds = (np.array(t["jll_yes"], float) - np.array(t["jll_no"], float))[labelled]
        assert ev.positive_class == "yes"
        assert ev.roc_auc == pytest.approx(metrics.roc_auc_score(y == "yes", log_odds), abs=1e-14)
        assert ev.roc_auc == pytest.approx(metrics.roc_auc_score(y == "yes", P[:, 1]), abs=1e-12)
    else:
        assert ev.roc_auc is None


def test_auc_handles_ties_and_saturated_probabilities(con):
    # A bernoulli model over two binary columns puts rows into 4 score groups (ties), and
    # a column that decides the class saturates p to exactly 0 or 1 in DOUBLE.
    rng = np.random.default_rng(3)
    n = 200
    y = rng.random(n) < 0.4
    t = pa.table({"f1": (rng.random(n) < np.where(y, 0.7, 0.2)), "f2": (rng.random(n) < 0.5),
                  "y": np.where(y, "pos", "neg").tolist()})
    con.register("t", t)
    model = sqlnb.fit("t", "y", con=con)
    ev = evaluate(model, "t", con)
    rows, P = scored_rows(model, "t", con)
    truth = np.array(rows["y"]) == "pos"
    assert ev.roc_auc == pytest.approx(metrics.roc_auc_score(truth, P[:, 1]), abs=1e-14)


def test_rows_without_probabilities_and_unknown_labels_are_reported(con):
    # MLE: 'p' in c1 only ever occurs with class a, 'q' in c2 only with class b, so a row
    # (p, q) has zero likelihood under both classes: no probabilities, no prediction.
    train = pa.table({"c1": ["p", "r", "r", "r"], "c2": ["s", "q", "s", "s"], "y": ["a", "b", "a", "b"]})
    test = pa.table({"c1": ["p", "r", "r", "r"], "c2": ["q", "s", "s", "s"], "y": ["a", "a", "b", "zzz"]})
    con.register("train", train)
    con.register("test", test)
    model = sqlnb.fit("train", "y", con=con, estimator="mle")
    ev = evaluate(model, "test", con)
    rows, P = scored_rows(model, "test", con)
    assert rows["prediction"][0] is None and np.isnan(P[0]).all()
    assert (ev.rows, ev.labelled_rows, ev.no_proba_rows, ev.unknown_label_rows) == (4, 4, 1, 1)
    correct = sum(p == y for p, y in zip(rows["prediction"], rows["y"]))
    assert ev.accuracy == correct / 4  # the row without probabilities is an error
    # log loss over the 3 rows with probabilities; the unknown label has p = 0 -> -ln(eps)
    p_label = [P[1, 0], P[2, 1], 0.0]
    want = np.mean([-np.log(np.clip(p, EPS, 1 - EPS)) for p in p_label])
    assert ev.log_loss == pytest.approx(want, rel=1e-14)
    assert ev.confusion_true == ["a", "b", "zzz"] and ev.confusion_predicted == ["a", "b", None]
    assert sum(map(sum, ev.confusion)) == 4 and ev.confusion[0][2] == 1
    text = text_report(ev)
    assert "1 rows have no probabilities or prediction (zero likelihood under every class" in text
    assert "1 rows have a label the model does not know" in text
    assert "(none)" in text


def test_evaluation_over_a_table_without_labels(con):
    con.register("train", mixed_table(60, seed=1, classes=("x", "y")))
    test = with_nulls(mixed_table(10, seed=2, classes=("x", "y")), "y", every=1)
    con.register("test", test)
    ev = evaluate(sqlnb.fit("train", "y", con=con), "test", con)
    assert ev.labelled_rows == 0 and ev.accuracy is None and ev.roc_auc is None and ev.log_loss is None
    assert "accuracy    n/a" in text_report(ev)
