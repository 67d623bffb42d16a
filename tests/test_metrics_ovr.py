"""One-vs-rest ROC AUC and average precision, the ECE and the curves:
computed in SQL, they equal scikit-learn's on the probabilities sqlnb outputs within 1e-9,
and the ECE equals a numpy computation of its definition (sqlnb/workflows/ranking.py).

The data: an iris-like 3-class set and a 2-class one with tied scores (categorical and
rounded features), rows with no probabilities (MLE zero likelihoods), unlabelled rows and,
where said, labels the model does not know; spambase from ../shared/data; a set whose
probabilities saturate to 0 and 1, where the ranking follows the log-odds. PostgreSQL and
Spark compute the same figures and curves as DuckDB.
"""

from __future__ import annotations

import warnings

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn import metrics

import sqlnb
from sqlnb.models.finish import class_columns
from sqlnb.workflows.curves import curve_points
from sqlnb.workflows.evaluate import evaluate, text_report
from sqlnb.workflows.ranking import BINS
from support.engines import close_to as _close_to, postgres_engine, spark_engine

TOL = 1e-9


def close_to(a, b, where: str, tol: float = TOL) -> None:
    """support.engines.close_to, with equal infinities equal (curve thresholds)."""
    if isinstance(b, float) and isinstance(a, float) and a == b:
        return
    if isinstance(b, (dict, list)):
        assert type(a) is type(b) and len(a) == len(b), (where, a, b)
        keys = b.keys() if isinstance(b, dict) else range(len(b))
        if isinstance(b, dict):
            assert a.keys() == b.keys(), where
        for k in keys:
            close_to(a[k], b[k], f"{where}[{k!r}]", tol)
        return
    _close_to(a, b, where, tol)


# -- data ------------------------------------------------------------------------------------
def _iris_like(n: int, seed: int, classes: tuple, unknown: bool = False) -> pa.Table:
    """Petal-like measurements rounded to a millimetre (tied scores), a colour and a
    category ``site`` that, fitted by MLE, makes some classes impossible for a row; every
    13th label missing, and (``unknown``) every 11th a label no class has."""
    r = np.random.default_rng(seed)
    k = r.integers(0, len(classes), n)
    length = np.round(r.normal(1.5 + 1.2 * k, 0.6), 1)
    width = np.round(r.normal(0.3 + 0.5 * k, 0.4), 1)
    colour = np.array(["white", "blue", "violet"])[(k + (r.random(n) < 0.4) * r.integers(1, 3, n)) % 3]
    site = np.where(r.random(n) < 0.7, np.array(["north", "east", "south"])[k % 3], "west")
    mark = np.where(r.random(n) < 0.5, np.array(["m0", "m1", "m2"])[k % 3], "none")
    labels = np.array(classes, dtype=object)[k].tolist()
    labels = [None if i % 13 == 0 else ("other" if unknown and i % 11 == 0 else v) for i, v in enumerate(labels)]
    return pa.table({"id": np.arange(n), "length": length, "width": width, "colour": colour.tolist(),
                     "site": site.tolist(), "mark": mark.tolist(), "y": labels})


def _fit_and_test(con, classes: tuple, unknown: bool = False):
    train = _iris_like(300, 1, classes)
    train = train.filter(pa.array([y is not None for y in train["y"].to_pylist()]))
    # Fitted by MLE, site 'north' and mark 'm0' are seen with the first class only, 'east'
    # and 'm1' with the second: 'north' with 'm1' is impossible under every class.
    test = _iris_like(200, 2, classes, unknown)
    extra = pa.table({"id": [900, 901, 902], "length": [2.0, 3.0, 1.0], "width": [0.5, 1.0, 0.2],
                      "colour": ["white", "blue", "white"], "site": ["north", "east", "north"],
                      "mark": ["m1", "m0", "m0"], "y": [classes[0], classes[1], classes[0]]})
    test = pa.concat_tables([test, extra])
    con.register("train", train)
    con.register("test", test)
    model = sqlnb.fit("train", "y", con=con, exclude=["id"], estimator="mle")
    return model, test


def oracle_rows(model, data, con) -> dict:
    """The scored rows in numpy: labels, predictions, probabilities, and the one-vs-rest
    log-odds computed from sqlnb's log-probabilities (module docstring of ranking.py)."""
    classes = list(model.classes)
    t = model.score(data, con, outputs=("jll", "log_proba", "proba", "prediction")).to_arrow_table().to_pydict()
    P = np.array([t[c] for c in class_columns("proba_", classes)], dtype=float).T
    jll = np.array([t[c] for c in class_columns("jll_", classes)], dtype=float).T
    log_p = np.array([t[c] for c in class_columns("log_proba_", classes)], dtype=float).T
    if len(classes) == 2:
        odds = np.stack([jll[:, 0] - jll[:, 1], jll[:, 1] - jll[:, 0]], 1)
    else:
        odds = np.empty_like(P)
        for c in range(len(classes)):
            rest = P[:, [j for j in range(len(classes)) if j != c]].sum(1)  # same order as the SQL sum
            with np.errstate(divide="ignore"):
                odds[:, c] = np.where(rest > 0, log_p[:, c] - np.log(np.where(rest > 0, rest, 1.0)), np.inf)
    y = np.array(t[model.label], dtype=object)
    has_p = ~np.isnan(P[:, 0])
    known = np.array([v in classes for v in y])
    return {"y": y, "pred": np.array(t["prediction"], dtype=object), "P": P, "odds": odds,
            "scored": has_p & np.array([v is not None for v in y]), "ranked": has_p & known}


def finite(S: np.ndarray) -> np.ndarray:
    """``S`` with −inf and +inf in each column replaced by a finite value below / above
    every finite one (same order, same ties): scikit-learn refuses infinite scores."""
    S = S.astype(float).copy()
    for j in range(S.shape[1]):
        col = S[:, j]
        ok = col[np.isfinite(col)]
        lo, hi = (ok.min() - 1.0, ok.max() + 1.0) if ok.size else (-1.0, 1.0)
        S[:, j] = np.where(col == -np.inf, lo, np.where(col == np.inf, hi, col))
    return S


def numpy_ece(o: dict) -> tuple[float, list]:
    """The documented ECE: rows with a label and probabilities, confidence max_c p_c, bin
    min(floor(15·conf), 14), correct when prediction = label (an unknown label is wrong)."""
    s = o["scored"]
    conf = o["P"][s].max(1)
    correct = (o["pred"][s] == o["y"][s]).astype(float)
    b = np.minimum(np.floor(conf * BINS), BINS - 1).astype(int)
    ece = sum(abs(correct[b == i].sum() - conf[b == i].sum()) for i in range(BINS)) / s.sum()
    table = [[int((b == i).sum()), float(conf[b == i].mean()) if (b == i).any() else None,
              float(correct[b == i].mean()) if (b == i).any() else None] for i in range(BINS)]
    return ece, table


def check_against_sklearn(ev, o: dict, classes: list, scores: str = "P") -> None:
    """Per-class and averaged AUC and AP equal scikit-learn's over the ranked rows, given
    ``scores``: the probabilities (``P``) or the log-odds (``odds``)."""
    r = o["ranked"]
    y, S = o["y"][r], finite(o[scores][r])
    Y = np.stack([y == c for c in classes], 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a class without positives: scikit-learn warns
        auc = [metrics.roc_auc_score(Y[:, i], S[:, i]) if 0 < Y[:, i].sum() < len(y) else None
               for i in range(len(classes))]
        ap = [metrics.average_precision_score(Y[:, i], S[:, i]) if Y[:, i].any() else None
              for i in range(len(classes))]
    close_to([m.roc_auc for m in ev.per_class], auc, "per-class AUC", TOL)
    close_to([m.average_precision for m in ev.per_class], ap, "per-class AP", TOL)
    if all(a is not None for a in auc):
        P = o["P"][r]
        if len(classes) > 2 and scores == "P":
            for average, got in (("macro", ev.macro_roc_auc), ("weighted", ev.weighted_roc_auc)):
                want = metrics.roc_auc_score(y, P, multi_class="ovr", average=average, labels=classes)
                assert abs(got - want) <= TOL, (average, got, want)
        for average, got in (("macro", ev.macro_average_precision), ("weighted", ev.weighted_average_precision)):
            want = metrics.average_precision_score(Y, S, average=average)
            assert abs(got - want) <= TOL, (average, got, want)
    if len(classes) == 2:
        assert ev.roc_auc == ev.per_class[1].roc_auc
        assert abs(ev.per_class[0].roc_auc - ev.per_class[1].roc_auc) <= 1e-12  # the order reversed


# -- DuckDB against scikit-learn -------------------------------------------------------------
@pytest.mark.parametrize("classes", [("setosa", "versicolor", "virginica"), ("no", "yes")])
def test_metrics_equal_scikit_learn(con, classes):
    model, _ = _fit_and_test(con, classes)
    ev = evaluate(model, "test", con)
    o = oracle_rows(model, "test", con)
    assert ev.no_proba_rows == 2 and ev.unlabelled_rows > 0 and ev.unknown_label_rows == 0
    # Ties: far fewer distinct scores than ranked rows.
    assert len(np.unique(o["odds"][o["ranked"], 0])) < o["ranked"].sum() * 0.9
    check_against_sklearn(ev, o, list(classes), "P")
    check_against_sklearn(ev, o, list(classes), "odds")
    macro = metrics.roc_auc_score(o["y"][o["ranked"]] == classes[1], o["P"][o["ranked"], 1]) if len(classes) == 2 \
        else metrics.roc_auc_score(o["y"][o["ranked"]], o["P"][o["ranked"]], multi_class="ovr", labels=list(classes))
    assert abs(ev.macro_roc_auc - macro) <= TOL
    s = o["scored"]
    assert abs(ev.log_loss - metrics.log_loss(o["y"][s], o["P"][s], labels=list(classes))) <= TOL
    if len(classes) == 2:
        assert abs(ev.brier - metrics.brier_score_loss(o["y"][s] == classes[1], o["P"][s, 1])) <= TOL
    ece, table = numpy_ece(o)
    assert abs(ev.ece - ece) <= TOL
    close_to([[b["rows"], b["confidence"], b["accuracy"]] for b in ev.reliability], table, "reliability", TOL)
    assert [b["bin"] for b in ev.reliability] == list(range(BINS))
    text = text_report(ev)
    assert f"ECE         {ev.ece:.4f}" in text and "reliability (top-class probability" in text


def test_unknown_labels_are_wrong_in_the_ece_and_left_out_of_the_ranking(con):
    classes = ("setosa", "versicolor", "virginica")
    model, _ = _fit_and_test(con, classes, unknown=True)
    ev = evaluate(model, "test", con)
    o = oracle_rows(model, "test", con)
    assert ev.unknown_label_rows > 0
    check_against_sklearn(ev, o, list(classes), "P")
    ece, table = numpy_ece(o)
    assert abs(ev.ece - ece) <= TOL
    assert sum(b["rows"] for b in ev.reliability) == o["scored"].sum() > o["ranked"].sum()


def test_a_class_without_test_rows_is_left_out_of_the_averages(con):
    classes = ("setosa", "versicolor", "virginica")
    model, test = _fit_and_test(con, classes)
    con.register("two", test.filter(pa.array([y != "virginica" for y in test["y"].to_pylist()])))
    ev = evaluate(model, "two", con)
    o = oracle_rows(model, "two", con)
    assert ev.per_class[2].roc_auc is None and ev.per_class[2].average_precision is None
    check_against_sklearn(ev, o, list(classes), "P")
    # scikit-learn: NaN AUC (and macro) and AP 0 for the class; here it is undefined, not 0.
    assert ev.macro_roc_auc == pytest.approx((ev.per_class[0].roc_auc + ev.per_class[1].roc_auc) / 2, abs=1e-15)
    r = o["ranked"]
    Y = np.stack([o["y"][r] == c for c in classes[:2]], 1)
    assert abs(ev.macro_average_precision - metrics.average_precision_score(Y, o["P"][r][:, :2])) <= TOL
    assert abs(ev.weighted_average_precision
               - metrics.average_precision_score(Y, o["P"][r][:, :2], average="weighted")) <= TOL


@pytest.mark.parametrize("kind", ["lda", "qda", "logistic"])
def test_every_model_kind(con, kind):
    """LDA, QDA and logistic models share the scoring finish: the same figures, and their
    rows with a NULL feature (no probabilities) are left out as the module says."""
    classes = ("setosa", "versicolor", "virginica")
    train = _iris_like(300, 3, classes)
    train = train.filter(pa.array([y is not None for y in train["y"].to_pylist()]))
    test = _iris_like(150, 4, classes, unknown=True)
    width = test["width"].to_pylist()
    test = test.set_column(2, "width", pa.array([None if i % 7 == 0 else v for i, v in enumerate(width)], pa.float64()))
    con.register("ktrain", train)
    con.register("ktest", test)
    model = getattr(sqlnb, f"fit_{kind}")("ktrain", "y", con=con, features=["length", "width"])
    ev = evaluate(model, "ktest", con)
    o = oracle_rows(model, "ktest", con)
    assert ev.no_proba_rows > 0 and ev.unknown_label_rows > 0
    check_against_sklearn(ev, o, list(classes), "P")
    ece, _ = numpy_ece(o)
    assert abs(ev.ece - ece) <= TOL


def _saturated():
    """Three Gaussian classes 12 standard deviations apart, fitted on clean labels: many
    test probabilities round to exactly 1.0, and 15% of the test labels are redrawn at
    random, so the rows tied at p = 1.0 hold positives and negatives alike."""
    r = np.random.default_rng(5)
    k = r.integers(0, 3, 400)
    noisy = np.where(r.random(400) < 0.15, r.integers(0, 3, 400), k)
    t = pa.table({"x": r.normal(12.0 * k, 1.0), "w": r.normal(0.0, 1.0, 400),
                  "y": np.array(["a", "b", "c"], dtype=object)[np.r_[k[:200], noisy[200:]]].tolist()})
    return sqlnb.fit(t.slice(0, 200), "y"), t.slice(200)


def test_saturated_probabilities_rank_by_the_log_odds(con):
    model, test = _saturated()
    con.register("sat_test", test)
    ev = evaluate(model, "sat_test", con)
    o = oracle_rows(model, "sat_test", con)
    r = o["ranked"]
    y = o["y"][r]
    check_against_sklearn(ev, o, ["a", "b", "c"], "odds")
    # The case exists: scikit-learn given the probabilities counts the rows at p = 1.0 as
    # ties, and its figures differ (ranking.py: why the log-odds).
    assert (o["P"][r] == 1.0).sum() > 100
    on_p = metrics.roc_auc_score(y, o["P"][r], multi_class="ovr", labels=["a", "b", "c"])
    assert abs(ev.macro_roc_auc - on_p) > 1e-3
    ece, _ = numpy_ece(o)
    assert abs(ev.ece - ece) <= TOL


def test_spambase_equals_scikit_learn_on_the_log_odds(spambase):
    con = spambase[0]
    model = sqlnb.fit("SELECT * FROM spambase WHERE NOT is_test", "spam", con=con, exclude=["row_id", "is_test"])
    data = "SELECT * FROM spambase WHERE is_test"
    ev = evaluate(model, data, con)
    o = oracle_rows(model, con.sql(data), con)
    check_against_sklearn(ev, o, [0, 1], "odds")
    s = o["scored"]
    assert abs(ev.log_loss - metrics.log_loss(o["y"][s].astype(int), o["P"][s], labels=[0, 1])) <= TOL
    assert abs(ev.brier - metrics.brier_score_loss(o["y"][s].astype(int), o["P"][s, 1])) <= TOL
    ece, table = numpy_ece(o)
    assert abs(ev.ece - ece) <= TOL and ev.ece > 0.05  # Gaussian NB is overconfident on spambase


# -- curves ----------------------------------------------------------------------------------
def test_curve_points_equal_scikit_learns_curves(con):
    classes = ["setosa", "versicolor", "virginica"]
    model, _ = _fit_and_test(con, tuple(classes))
    pts = curve_points(model, "test", con)
    ev = evaluate(model, "test", con)
    whole = {c: dict(zip(pts["roc"][c]["threshold"][1:], zip(pts["roc"][c]["fpr"][1:], pts["roc"][c]["tpr"][1:])))
             for c in classes}  # (the first point, threshold +inf, is (0, 0); a score may be +inf too)
    o = oracle_rows(model, "test", con)
    r = o["ranked"]
    odds = o["odds"][r]
    assert np.isinf(odds).any()  # p = 0 or 1 exactly (MLE): log-odds ±inf
    S = finite(odds)
    for i, c in enumerate(classes):
        # Our thresholds as scikit-learn sees them (±inf made finite), but the first, +inf.
        as_finite = dict(zip(odds[:, i].tolist(), S[:, i].tolist()))
        for curve in (pts["roc"][c], pts["pr"][c]):
            curve["threshold"] = curve["threshold"][:1] + [as_finite[t] for t in curve["threshold"][1:]]
        fpr, tpr, thr = metrics.roc_curve(o["y"][r] == c, S[:, i], drop_intermediate=False)
        close_to(pts["roc"][c], {"fpr": fpr.tolist(), "tpr": tpr.tolist(), "threshold": thr.tolist()}, c, TOL)
        prec, rec, thr = metrics.precision_recall_curve(o["y"][r] == c, S[:, i], drop_intermediate=False)
        close_to(pts["pr"][c], {"precision": prec[::-1].tolist(), "recall": rec[::-1].tolist(),
                                "threshold": [np.inf] + thr[::-1].tolist()}, c, TOL)
        # The area under the returned points is the AUC evaluate reports.
        assert abs(np.trapezoid(pts["roc"][c]["tpr"], pts["roc"][c]["fpr"])
                   - ev.per_class[i].roc_auc) <= TOL
    assert pts["reliability"] == ev.reliability
    thin = curve_points(model, "test", con, max_points=10)
    for c in classes:
        roc = thin["roc"][c]
        assert 5 <= len(roc["fpr"]) <= 12 and roc["fpr"][-1] == roc["tpr"][-1] == 1.0
        assert all(whole[c][t] == p for t, p in zip(roc["threshold"][1:], zip(roc["fpr"][1:], roc["tpr"][1:])))


# -- engines ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cases():
    """``{name: (model, test table, Evaluation, curves)}`` computed in DuckDB."""
    con = duckdb.connect()
    out = {}
    model, test = _fit_and_test(con, ("setosa", "versicolor", "virginica"), unknown=True)
    out["iris"] = (model, test, evaluate(model, "test", con), curve_points(model, "test", con))
    model, test = _saturated()
    con.register("sat_test", test)
    out["saturated"] = (model, test, evaluate(model, "sat_test", con), curve_points(model, "sat_test", con))
    yield out
    con.close()


def _same_on(engine, cases, where: str) -> None:
    for name, (model, _, ev, pts) in cases.items():
        got = evaluate(model, f"t_{name}", con=engine).to_dict()
        want = ev.to_dict()
        got.pop("seconds"), want.pop("seconds")
        close_to(got, want, f"{where} {name}", TOL)
        close_to(curve_points(model, f"t_{name}", con=engine), pts, f"{where} {name} curves", TOL)


@pytest.mark.postgres
def test_postgres_computes_the_same_figures_and_curves(cases):
    with postgres_engine({f"t_{n}": c[1] for n, c in cases.items()}) as engine:
        _same_on(engine, cases, "postgres")


@pytest.mark.spark
def test_spark_computes_the_same_figures_and_curves(cases):
    with spark_engine({f"t_{n}": c[1] for n, c in cases.items()}) as engine:
        _same_on(engine, cases, "spark")
