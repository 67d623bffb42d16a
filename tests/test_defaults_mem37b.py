"""Issue 27, point 3: ``sqlnb cv --kind qda`` on 10,000 one-hot rows within 300 MiB (session 37).

In the pooled cross-validation query each QDA fold model wrote each whitened component
``z_m = v·W_m − o_m`` as a ``list_dot_product`` node of its own (5 fold models × 2 classes
× 104 one-hot columns of adult: 1,040 nodes), and DuckDB gives every node of a running
expression, in every thread, intermediate vectors of 2,048 rows: 319 MiB peak (288 with
one thread). Now a class score reads its ``W`` as one matrix literal
(:meth:`sqlnb.models.discriminant.QDA.list_class_scores`) with the same doubles, row by
row. Checked here: the peak RSS of the command as a whole process, the pooled query's
shape, bit-identical class scores (one and two runs of ``ADD_RUN`` squares, a reference
not the model's own) and fold figures equal to refits'.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.models.discriminant import QDA, JointMoments
from sqlnb.source import read_with
from sqlnb.workflows import cv
from test_cv import assert_matches_refits
from test_defaults_mem37 import LIMIT_MIB, peak_mib

ROWS = 10_000
#: Categories per one-hot encoded column: with 6 numeric columns, 104 features (adult's shape).
CATEGORIES = (8, 16, 7, 14, 6, 5, 2, 40)


def onehot(n: int = ROWS, seed: int = 27, categories=CATEGORIES, numeric: int = 6) -> pa.Table:
    """``numeric`` DOUBLE columns and one 0/1 DOUBLE column per category of each of
    ``categories`` (every category present in both classes), a text label."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    cols = {f"x{j}": rng.normal(3.0 * y * (j % 2), 1.0 + j, n) for j in range(numeric)}
    for c, m in enumerate(categories):
        code = (rng.integers(0, m, n) + y * rng.integers(0, 2, n)) % m
        code[:2 * m] = np.arange(2 * m) % m  # every category in the first rows, of both classes
        y[:2 * m] = np.arange(2 * m) // m if c == 0 else y[:2 * m]
        for v in range(m):
            cols[f"c{c}={v}"] = (code == v).astype(float)
    cols["income"] = np.where(y == 1, ">50K", "<=50K")
    return pa.table(cols)


def test_cv_qda_on_10k_onehot_rows_within_300_mib(tmp_path):
    data = tmp_path / "onehot.parquet"
    t = onehot()
    assert t.num_columns - 1 == 104
    duckdb.from_arrow(t).write_parquet(str(data))
    peak = peak_mib(["cv", str(data), "--label", "income", "--kind", "qda", "--grid", "reg_param=0.1"])
    assert peak <= LIMIT_MIB, f"cv --kind qda: {peak:.0f} MiB"


def _models(t: pa.Table, folds: int = 5, reg_param: float = 0.1) -> list:
    """QDA models on ``folds`` different row subsets of ``t`` (one feature list), their
    moments computed here in numpy (a fit of 104 columns takes a second)."""
    features = {c: "DOUBLE" for c in t.column_names if c != "income"}
    X = np.column_stack([t[c].to_numpy() for c in features])
    y = t["income"].to_numpy(zero_copy_only=False)
    classes = sorted(set(y))
    out = []
    for i in range(folds):
        keep = np.arange(len(y)) % folds != i
        parts = [X[keep & (y == c)] for c in classes]
        moments = JointMoments(classes, np.array([len(p) for p in parts], float), np.array([p.mean(0) for p in parts]),
                               np.array([(p - p.mean(0)).T @ (p - p.mean(0)) for p in parts]))
        out.append(QDA("income", "VARCHAR", features, moments, reg_param=reg_param))
    return out


def test_pooled_qda_query_writes_a_dot_product_per_run_not_per_component(con):
    t = onehot(n=600)
    con.register("t", t)
    src, fold = cv.assign_folds(as_engine(con).resolve(read_with("t")), "income", 5, 0, None, "duckdb")
    text = sql.render(cv.pooled_summary_query(_models(t), src, "income", fold, 5, "cv_model"), "duckdb").upper()
    # 5 models × 2 classes × 2 runs of squares (104 = 64 + 40), not × 104 components
    assert text.count("LIST_DOT_PRODUCT") == 5 * 2 * 2, text.count("LIST_DOT_PRODUCT")


@pytest.mark.parametrize("categories", [(8, 16, 7), (8, 16, 7, 14, 6, 5, 2, 40)])  # 37 and 104 features
def test_list_class_scores_equal_class_terms_bit_for_bit(con, categories):
    t = onehot(n=800, categories=categories)
    models = _models(t, folds=2)
    reference = models[0].reference()  # the second model scores about another model's centre, as in cv
    src = as_engine(con).resolve(read_with(t))
    types = dict(src.columns)
    for model in models:
        prelude = model.score_prelude(types, "duckdb", reference=reference)
        inner = exp.select(exp.Column(this=exp.Star(), table=sql.ident("src")),
                           *[exp.alias_(e, n, quoted=True) for n, e in prelude]).from_(src.from_("src"))
        old = [s.expression() for s in model.class_terms(types, "duckdb", reference=reference)]
        new = model.list_class_scores(reference)
        query = exp.select(*[exp.alias_(e, f"old{k}") for k, e in enumerate(old)],
                           *[exp.alias_(e, f"new{k}") for k, e in enumerate(new)]
                           ).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("src"))))
        got = con.sql(sql.render(query, "duckdb")).fetchnumpy()
        for k in range(len(old)):
            a, b = np.asarray(got[f"old{k}"], float), np.asarray(got[f"new{k}"], float)
            assert np.isfinite(a).all() and a.view(np.int64).tolist() == b.view(np.int64).tolist()


def test_qda_cv_in_the_matrix_shape_equals_refits(con):
    t = onehot(n=300, categories=(8, 16, 7, 3))  # 40 features: the list shape
    t = t.rename_columns([c if c != "income" else "y" for c in t.column_names])
    con.register("t", t)
    result = sqlnb.cross_validate("t", "y", con=con, model="qda", folds=3, grid={"reg_param": [0.2]}, refit=False)
    assert result.scans["scoring"] == 1
    assert_matches_refits(con, result, "t", model_kind="qda")
