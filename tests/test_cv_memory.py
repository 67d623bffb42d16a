"""Cross-validation's pooled scoring query within 300 MiB on 10,000 rows, with fold figures
equal to refits'.

``sqlnb cv --kind categorical`` on adult's raw 10,000 rows peaked at ~1 GB: every integer
column taken as categories (fnlwgt with ~8,500 values) and the pooled scoring query of the
5 fold models wrote each fold model's lookup as a ``VALUES`` row per training value
(~55,000 rows of literals: 384 MiB to build the tree, 185 MiB to render it, the rest in
DuckDB's planner). In DuckDB the pooled query now looks values up as a model's own
scoring query does (in place up to ``INLINE_MAX`` values, else packed), with the same
log-probabilities: fold figures still equal refits'. Checked here: refits on a vocabulary
that straddles ``INLINE_MAX`` across the folds, the query's shape per dialect, and the
whole process's peak RSS (a child process, ``getrusage(RUSAGE_CHILDREN)`` of a wrapper
that runs only it, as tests/test_defaults_smallmem.py measures).
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
from sqlnb.models.naive_bayes.families.categorical import INLINE_MAX
from sqlnb.source import read_with
from sqlnb.workflows import cv
from support.cv_oracle import assert_matches_refits, oracle_folds
from support.processes import peak_mib

LIMIT_MIB = 300
ROWS = 10_000

def straddling(seed: int = 0, n: int = 600) -> pa.Table:
    """A BIGINT column with INLINE_MAX + 4 values, 14 of them rare, so that some training
    folds see more than INLINE_MAX values (packed lookup) and others fewer (in place); a
    text column of few values; two classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    code = rng.integers(0, INLINE_MAX - 6 - 30 * y, n) * 7  # 94 values, class 1 on the first 64
    code[:14] = INLINE_MAX * 7 + np.arange(14)  # 14 values seen once each
    colour = np.array(["red", "green", "blue"], dtype=object)[(y + rng.integers(0, 2, n)) % 3]
    return pa.table({"code": pa.array(code, pa.int64()), "colour": pa.array(colour), "y": pa.array(y)})


@pytest.mark.parametrize("grid", [None, {"alpha": [0.5], "unseen": ["missing", "bucket"]}, {"estimator": ["mle"]}])
def test_categorical_cv_with_packed_and_inline_fold_lookups_equals_refits(con, grid):
    t = straddling()
    con.register("t", t)
    rows, fold = oracle_folds(con, "t", "y", 4, 1)  # the training folds' vocabularies straddle INLINE_MAX
    sizes = [len(set(rows.filter(pa.array(fold != i))["code"].to_pylist())) for i in range(4)]
    assert min(sizes) <= INLINE_MAX < max(sizes), sizes
    result = sqlnb.cross_validate("t", "y", con=con, folds=4, seed=1, grid=grid, refit=False, kind="categorical")
    assert result.scans["scoring"] == 1
    assert_matches_refits(con, result, "t", kind="categorical")


def _pooled(con, dialect: str, n: int = 300) -> str:
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, n)
    t = pa.table({"weight": pa.array(rng.integers(0, 10 ** 6, n)), "y": pa.array(y)})  # ~n distinct values
    con.register("w", t)
    src, fold = cv.assign_folds(as_engine(con).resolve(read_with("w")), "y", 5, 0, None, "duckdb")
    models = [sqlnb.fit(t, "y", con=con, kind="categorical", features=["weight"])] * 5
    return sql.render(cv.pooled_summary_query(models, src, "y", fold, 5, "cv_model", dialect), dialect)


def test_pooled_query_writes_no_values_row_per_training_value_in_duckdb(con):
    """In DuckDB the pooled query of 5 fold models over a column of ~300 values is a few
    packed literals (no VALUES list); for PostgreSQL it keeps the portable VALUES join."""
    duck = _pooled(con, "duckdb").upper()
    values = duck.count("VALUES") - duck.count("(VALUES (0))")  # the grid's one index is a VALUES list
    assert values == 0 and len(duck) < 40_000, f"{values} VALUES lists, {len(duck):,} characters"
    assert "VALUES" in _pooled(con, "postgres").upper()


def adult_like_csv(path) -> None:
    """10,000 rows shaped as adult's raw file: 6 integer columns (fnlwgt distinct in ~85% of the
    rows, below screening's identifier threshold of 90%, as adult's; the others of 16 to 100
    values) and 8 text columns (2 to 41 categories), a text label."""
    rng = np.random.default_rng(37)
    y = rng.integers(0, 2, ROWS)
    cols = {"age": rng.integers(17, 90, ROWS) + 3 * y, "fnlwgt": rng.integers(0, 30_000, ROWS) * 41 + 12_285,
            "education_num": rng.integers(1, 17, ROWS) + y, "capital_gain": rng.integers(0, 100, ROWS) * 37,
            "capital_loss": rng.integers(0, 73, ROWS) * 29, "hours_per_week": rng.integers(1, 84, ROWS)}
    for c, m in enumerate((8, 16, 7, 14, 6, 5, 2, 41)):
        cols[f"c{c}"] = np.char.add("v", ((rng.integers(0, m, ROWS) + y) % m).astype(str))
    cols["income"] = np.where(y == 1, ">50K", "<=50K")
    duckdb.from_arrow(pa.table(cols)).write_csv(str(path))


def test_cv_categorical_on_10k_raw_rows_within_300_mib(tmp_path):
    data = tmp_path / "adult_like.csv"
    adult_like_csv(data)
    peak = peak_mib(["cv", str(data), "--label", "income", "--kind", "categorical"])
    assert peak <= LIMIT_MIB, f"cv --kind categorical: {peak:.0f} MiB"


# --------------------------------------------------------------------------------------------
# ``sqlnb cv --kind qda`` on 10,000 one-hot rows within 300 MiB.
#
# In the pooled cross-validation query each QDA fold model wrote each whitened component
# ``z_m = v·W_m − o_m`` as a ``list_dot_product`` node of its own (5 fold models × 2 classes
# × 104 one-hot columns of adult: 1,040 nodes), and DuckDB gives every node of a running
# expression, in every thread, intermediate vectors of 2,048 rows: 319 MiB peak (288 with
# one thread). Now a class score reads its ``W`` as one matrix literal
# (:meth:`sqlnb.models.discriminant.QDA.list_class_scores`) with the same doubles, row by
# row. Checked here: the peak RSS of the command as a whole process, the pooled query's
# shape, bit-identical class scores (one and two runs of ``ADD_RUN`` squares, a reference
# not the model's own) and fold figures equal to refits'.
# --------------------------------------------------------------------------------------------


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
