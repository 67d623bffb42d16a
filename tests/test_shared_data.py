"""Naive Bayes on the real UCI datasets in ../shared/data, against scikit-learn.

Skipped with a reason on a machine without ../shared/data; CI always has it, and there a
missing folder fails (support.shared_data.require_shared_data).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import CategoricalNB, GaussianNB
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.models.finish import class_columns
from support import shared_data as sd

pytestmark = pytest.mark.shared_data


def source(q: exp.Expression) -> sqlnb.Query:
    return sqlnb.Query(sd.render(q))


def scored(model, q, con, outputs=("jll", "proba", "prediction")):
    rel = model.score(source(q), con, outputs=outputs)
    return rel.to_arrow_table().to_pydict()


@pytest.fixture(scope="module")
def adult():
    sd.require_shared_data("adult")
    con = duckdb.connect()
    model = sqlnb.fit(source(sd.adult_train_query()), "income", con=con)
    return con, model


def test_adult_mixed_model_with_nulls_marginalised(adult):
    con, model = adult
    kinds = {f.name: f.kind for f in model.features}
    assert [n for n, k in kinds.items() if k == "gaussian"] == list(sd.ADULT_NUMERIC)
    assert [n for n, k in kinds.items() if k == "categorical"] == list(sd.ADULT_CATEGORICAL)
    out = scored(model, sd.adult_test_query(), con, outputs=("prediction",))
    truth = out["income"]
    assert len(truth) == 16281  # every test row is scored, NULLs and all
    error = np.mean([p != t for p, t in zip(out["prediction"], truth)])
    assert error <= 0.181, error


def test_adult_joint_log_likelihood_equals_sklearn_gaussian_plus_categorical():
    sd.require_shared_data("adult")
    con = duckdb.connect()
    model = sqlnb.fit(source(sd.adult_train_query(drop_missing=True)), "income", con=con)
    ds = sd.numpy_dataset("adult", missing="drop")
    train, test = ds.train(), ds.test()
    g = GaussianNB().fit(train.numeric, train.y)
    c = CategoricalNB().fit(train.categorical, train.y)
    ref = (g.predict_joint_log_proba(test.numeric) + c.predict_joint_log_proba(test.categorical)
           - np.log(c.class_count_ / c.class_count_.sum()))
    out = scored(model, sd.adult_test_query(drop_missing=True), con)
    jll = np.array([out[n] for n in class_columns("jll_", model.classes)]).T
    assert jll.shape == ref.shape
    np.testing.assert_allclose(jll, ref, atol=1e-9, rtol=0)
    pred = np.array(out["prediction"], dtype=object)
    assert (pred == np.array(model.classes, dtype=object)[ref.argmax(axis=1)]).all()
    assert np.mean(pred != test.y) == pytest.approx(0.1809, abs=5e-4)  # README: 18.1 %


def cv_accuracy(name: str, missing_as_value: bool) -> float:
    """5-fold stratified CV (shuffled, seed 0) in SQL, the folds of scikit-learn."""
    sd.require_shared_data(name)
    con = duckdb.connect()
    ds = sd.numpy_dataset(name, missing="value")
    label = sd.LABEL_COLUMN[name]
    base = sd.query(name, row_id=True)
    if missing_as_value:  # '?' as its own category, as scikit-learn's reference runs
        cols = [sql.col(label)] + [
            exp.alias_(exp.Coalesce(this=sql.col(c), expressions=[exp.Literal.string("?")]), c, quoted=True)
            for c in sd.CATEGORICAL_FEATURES[name]
        ] + [sql.col("row_id")]
        base = exp.select(*cols).from_(exp.Subquery(this=base, alias=exp.TableAlias(this=sql.ident("b"))))
    folds = np.zeros(len(ds.y), dtype=int)
    for i, (_, test) in enumerate(StratifiedKFold(5, shuffle=True, random_state=0).split(ds.categorical, ds.y)):
        folds[test] = i
    con.register("folds", pa.table({"row_id": ds.row_id, "fold": folds}))
    correct = 0
    for i in range(5):
        def part(cond):
            return (exp.select(exp.Column(this=exp.Star(), table=sql.ident("d")))
                    .from_(exp.Subquery(this=base.copy(), alias=exp.TableAlias(this=sql.ident("d"))))
                    .join(sql.table("folds"), using=["row_id"])
                    .where(cond(sql.col("fold"), exp.Literal.number(i))))
        train = part(lambda a, b: exp.NEQ(this=a, expression=b))
        test = part(lambda a, b: exp.EQ(this=a, expression=b))
        model = sqlnb.fit(source(train), label, con=con, exclude=["row_id"])
        out = scored(model, test, con, outputs=("prediction",))
        correct += sum(p == t for p, t in zip(out["prediction"], out[label]))
    return correct / len(ds.y)


@pytest.mark.parametrize("name, reference", [("mushroom", 0.9532), ("votes", 0.9011)])
def test_categorical_cv_matches_sklearn_reference(name, reference):
    # '?' as a value: the same model as scikit-learn's CategoricalNB reference run.
    assert cv_accuracy(name, missing_as_value=True) == pytest.approx(reference, abs=5e-5)


@pytest.mark.parametrize("name", ["mushroom", "votes"])
def test_categorical_cv_with_missing_marginalised(name):
    # '?' as NULL, marginalised: runs end to end; the figure is in the README.
    acc = cv_accuracy(name, missing_as_value=False)
    assert 0.85 < acc < 1.0
