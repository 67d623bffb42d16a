"""Every averaged metric of ``sqlnb evaluate`` follows
scikit-learn's convention and equals its function within 1e-12, on test sets where a class
of the model is absent, where a label is unknown to the model, and where every row is of
one class.

Conventions checked (sqlnb.workflows.evaluate's module docstring):

* precision, recall, F1 (macro, weighted, micro) and balanced accuracy:
  ``precision_recall_fscore_support(y, pred, average=..., zero_division=0)`` with
  ``labels=None`` (those in ``y`` or ``pred``; the default, ``labels="present"``) or
  ``labels=model.classes`` (``labels="model"``), and ``balanced_accuracy_score``;
* log loss and Brier: ``log_loss`` / ``brier_score_loss`` with ``labels=model.classes``;
  a label the model does not know is one more label with probability 0 (the augmented
  matrix); Brier halved for two classes (``scale_by_half``, as the binary ``brier_score_loss``);
* ROC AUC and average precision, one-vs-rest: ``roc_auc_score(y == c, s_c)`` and
  ``average_precision_score`` per class over the rows whose label is a class, averaged
  over the classes where defined (``roc_auc_score`` finds the classes in ``y``; it raises on
  a one-class test set, as scikit-learn 1.9 warns and gives NaN, sqlnb reports None).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st
from sklearn import metrics
from sklearn.exceptions import UndefinedMetricWarning

import sqlnb
from sqlnb.workflows.evaluate import evaluate
from support.cli import invoke
from support.hypothesis_profiles import examples

CLASSES = ["a", "b", "c", "d", "e"]


def categorical(n: int, seed: int, classes=CLASSES, weights=None) -> pa.Table:
    """``n`` rows of three categorical features that depend on a label from ``classes``."""
    rng = np.random.default_rng(seed)
    y = rng.choice(classes, size=n, p=weights)
    idx = np.array([classes.index(v) for v in y])
    cols = {}
    for j, levels in enumerate((4, 5, 3)):
        noise = rng.integers(0, levels, size=n)
        keep = rng.random(n) < 0.55
        cols[f"f{j}"] = [f"v{v}" for v in np.where(keep, (idx + j) % levels, noise)]
    cols["y"] = y.tolist()
    return pa.table(cols)


def scored(model, con, table: str):
    """The labels, predictions, probabilities and one-vs-rest log-odds of every row."""
    t = model.score(table, con, outputs=("log_proba", "proba", "prediction")).to_arrow_table().to_pydict()
    P = np.array([t[c] for c in model.proba_columns()], dtype=float).T
    y = np.array(t["y"], dtype=object)
    pred = np.array(t["prediction"], dtype=object)
    return y, pred, P


def ovr_oracle(y, P, classes):
    """Per class c whose rows are present: scikit-learn's binary AUC and AP of ``y == c``
    against p_c, over the rows whose label is a class; the macro and weighted means."""
    known = np.isin(y, classes)
    y, P = y[known], P[known]
    auc, ap, w = [], [], []
    for i, c in enumerate(classes):
        pos = y == c
        if pos.any():
            ap.append(metrics.average_precision_score(pos, P[:, i]))
            w.append(pos.sum())
            if (~pos).any():
                auc.append(metrics.roc_auc_score(pos, P[:, i]))
    ranked = len(set(y)) > 1
    return {"macro_roc_auc": float(np.mean(auc)) if ranked else None,
            "weighted_roc_auc": float(np.average(auc, weights=w)) if ranked else None,
            "macro_average_precision": float(np.mean(ap)), "weighted_average_precision": float(np.average(ap, weights=w))}


def label_oracle(y, pred, labels=None) -> dict:
    out = {}
    for avg in ("macro", "weighted", "micro"):
        p, r, f, _ = metrics.precision_recall_fscore_support(y, pred, labels=labels, average=avg, zero_division=0)
        out |= {f"{avg}_precision": p, f"{avg}_recall": r, f"{avg}_f1": f}
    out["balanced_accuracy"] = metrics.balanced_accuracy_score(y, pred)
    return out


def augmented(y, P, classes):
    """The probability matrix with one more column of 0 per label the model does not know."""
    extra = sorted(set(y) - set(classes))
    return np.hstack([P, np.zeros((len(P), len(extra)))]), list(classes) + extra


def check_all(ev, y, pred, P, classes):
    """Every averaged figure of ``ev`` against scikit-learn (module docstring)."""
    for name, want in label_oracle(y, pred).items():
        assert getattr(ev, name) == pytest.approx(want, abs=1e-12), name
    Pa, labels = augmented(y, P, classes)
    assert ev.log_loss == pytest.approx(metrics.log_loss(y, Pa, labels=labels), abs=1e-12)
    brier = metrics.brier_score_loss(y, Pa, labels=labels, scale_by_half=len(classes) == 2)
    assert ev.brier == pytest.approx(brier, abs=1e-12)
    for name, want in ovr_oracle(y, P, classes).items():
        assert getattr(ev, name) == (None if want is None else pytest.approx(want, abs=1e-12)), name


@pytest.fixture
def five(con):
    """A 5-class model (TAN) and a test set whose rarest class 'e' is absent."""
    train = categorical(600, 1, weights=[0.3, 0.27, 0.22, 0.18, 0.03])
    test = categorical(300, 11, classes=CLASSES[:4])
    con.register("train", train)
    con.register("test", test)
    return sqlnb.fit("train", "y", con=con, structure="tan"), con


def test_absent_class_left_out_of_macro_f1(five):
    model, con = five
    ev = evaluate(model, "test", con)
    y, pred, P = scored(model, con, "test")
    assert "e" not in set(pred)  # otherwise 'e' would be a predicted label, rightly averaged
    assert ev.averaged_labels == CLASSES[:4]
    assert ev.macro_f1 == pytest.approx(metrics.f1_score(y, pred, average="macro"), abs=1e-12)
    check_all(ev, y, pred, P, CLASSES)


def test_model_classes_on_request(five):
    model, con = five
    ev = evaluate(model, "test", con, labels="model")
    y, pred, P = scored(model, con, "test")
    assert ev.averaged_labels == CLASSES
    for name, want in label_oracle(y, pred, labels=CLASSES).items():
        if name != "balanced_accuracy":  # scikit-learn's has no labels: the same either way
            assert getattr(ev, name) == pytest.approx(want, abs=1e-12), name
    assert ev.balanced_accuracy == pytest.approx(metrics.balanced_accuracy_score(y, pred), abs=1e-12)
    assert ev.macro_f1 < evaluate(model, "test", con).macro_f1  # 'e' counts with F1 0


@pytest.mark.parametrize("classes", [CLASSES[:2], CLASSES[:3]])
def test_unknown_label(con, classes):
    con.register("train", categorical(400, 3, classes=classes))
    test = categorical(200, 4, classes=classes)
    ys = test["y"].to_pylist()
    ys = ["zz" if i % 9 == 0 else v for i, v in enumerate(ys)]  # a label the model never saw
    con.register("test", test.set_column(test.column_names.index("y"), "y", pa.array(ys)))
    model = sqlnb.fit("train", "y", con=con)
    ev = evaluate(model, "test", con)
    y, pred, P = scored(model, con, "test")
    assert ev.unknown_label_rows == sum(v == "zz" for v in ys) > 0
    assert ev.averaged_labels == [*classes, "zz"]
    check_all(ev, y, pred, P, classes)


@pytest.mark.parametrize("classes", [CLASSES[:2], CLASSES[:3]])
def test_one_class_test_set(con, classes):
    con.register("train", categorical(400, 5, classes=classes))
    con.register("test", categorical(80, 6, classes=classes[:1]))
    model = sqlnb.fit("train", "y", con=con)
    ev = evaluate(model, "test", con)
    y, pred, P = scored(model, con, "test")
    with pytest.warns(UndefinedMetricWarning):  # one class in y_true: undefined (NaN)
        assert np.isnan(metrics.roc_auc_score(y == classes[0], P[:, 0]))
    assert ev.macro_roc_auc is None and ev.weighted_roc_auc is None and ev.roc_auc is None
    check_all(ev, y, pred, P, classes)
    if len(classes) == 2:  # scikit-learn's binary Brier, on one class
        assert ev.brier == pytest.approx(metrics.brier_score_loss(y, P[:, 1], pos_label=classes[1],
                                                                  labels=classes), abs=1e-12)


def test_cli_says_which_labels_and_takes_labels_model(five, tmp_path):
    model, con = five
    db = tmp_path / "t.duckdb"
    con.execute(f"ATTACH '{db}' AS t")
    con.execute("CREATE TABLE t.train AS SELECT * FROM train")
    con.execute("CREATE TABLE t.test AS SELECT * FROM test")
    con.execute("DETACH t")
    assert invoke("fit", f"{db}:train", "--label", "y", "--structure", "tan", "--model", f"{db}:m").exit_code == 0
    result = invoke("evaluate", f"{db}:test", "--model", f"{db}:m")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("macro F1"))
    assert "over 4 labels" in line and "'e'" in line
    y, pred, _ = scored(model, con, "test")
    assert float(line.split()[2]) == pytest.approx(metrics.f1_score(y, pred, average="macro"), abs=5e-5)
    result = invoke("evaluate", f"{db}:test", "--model", f"{db}:m", "--labels", "model")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("macro F1"))
    assert float(line.split()[2]) == pytest.approx(metrics.f1_score(y, pred, labels=CLASSES, average="macro"),
                                                   abs=5e-5)


LABELS = ["a", "b", "c", "d"]


@settings(max_examples=examples(150))
@given(st.lists(st.tuples(st.sampled_from(LABELS + ["u", "v"]), st.sampled_from(LABELS)), min_size=1, max_size=40),
       st.sampled_from(["present", "model"]))
def test_label_averages_equal_scikit_learn(pairs, labels):
    """From the confusion counts, against scikit-learn on the rows, over random label
    vectors: absent classes, unknown labels ('u', 'v'), one-class sets all come up."""
    from sqlnb.workflows.evaluate import label_averages
    y = [a for a, _ in pairs]
    pred = [b for _, b in pairs]
    true_labels = LABELS + sorted(set(y) - set(LABELS))
    matrix = [[sum(1 for a, b in pairs if a == t and b == p) for p in LABELS] for t in true_labels]
    got = label_averages(LABELS, true_labels, LABELS, matrix, labels)
    want = label_oracle(np.array(y, dtype=object), np.array(pred, dtype=object),
                        labels=LABELS if labels == "model" else None)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, abs=1e-12), name
