"""What LDA, QDA and logistic regression share: a dense vector of numeric features.

These models see every feature at once (a covariance, a weight vector), so unlike
naive Bayes they cannot skip a missing value feature by feature. The policy:

* **Fit**: every feature of every labelled row must be a finite number. A NULL, NaN or
  ±inf feature raises a :class:`~sqlnb.errors.SqlnbError` naming the column; filter the
  rows (``WHERE col IS NOT NULL``) or impute in the source query (``COALESCE(col, 0)``).
  Rows whose label is NULL are skipped and counted, as for naive Bayes.
* **Score**: a row with a NULL, NaN or infinite feature has no score: its ``jll_*``,
  ``log_evidence``, probabilities and prediction are all NULL (never NaN). Each class
  score is wrapped in ``CASE WHEN <every feature finite> THEN <score> END``; the test
  ``ABS(x) < inf`` is false for NaN (which sorts above every number in DuckDB and
  Postgres) and for ±inf, and NULL for NULL.

Features are numeric or boolean columns, read as DOUBLE. Sample weights are not
supported by these model kinds.

**The list shape** (DuckDB, from :data:`LIST_MIN` features on). Written term by term, a
class score of LDA or logistic regression has one term per feature and QDA's one per
feature *pair* (its whitened components ``z_m = Σ_{j<=m} W_mj (x_j − μ_j)``): 104 one-hot
columns of adult made a QDA scoring SELECT of 11,000 products, which took 13 s and 1 GB to
score 10,000 rows. There, the row's values are read once into a list
``v = [x_1 − r_1, …, x_d − r_d]`` about a reference ``r`` (:meth:`DenseModel.score_prelude`),
and each linear form is one ``list_dot_product(v, w)`` with ``w`` a packed literal
(:func:`sqlnb.sql.packed_list`): a linear score is ``v·a_k + c_k'``, a QDA component
``z_m = v·W_m − W_m·(μ_k − r)``. ``r`` is the model's centre (the training mean; for QDA
the mean of the class means), so the numbers keep the size of the per-term shape's
``x − μ`` and the scores its digits (tests compare with scikit-learn to 1e-9). A row
that cannot be scored is still NULL: each class score is guarded by the prelude's
``sqlnb_complete``, :func:`complete` tested once per row. A NULL value is listed as 0
(``COALESCE``): DuckDB's ``list_dot_product`` refuses a list holding a NULL, even on a
row that a CASE leaves out (and even when the whole list is a CASE's NULL). Written into every class score of
every fold model, the complete-row test of 104 columns was most of a cross-validation's
pooled query (1,040 copies; 64 MB and 2 s of DuckDB's planning alone). Other dialects keep the per-term shape (no list functions there).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import DuckDBEngine, as_engine
from sqlnb.errors import SqlnbError, shell_word
from sqlnb.sql.build import ADD_RUN
from sqlnb.sql.types import is_float, is_numeric
from sqlnb.models.base import Model
from sqlnb.models.explain import FeatureTerms
from sqlnb.models.finish import ClassScore
from sqlnb.source import Source
from sqlnb.stats import _sort_key, census_query, nonfinite_values, overflow_error

#: Features from which DuckDB scores a dense model over one list per row (module docstring)
#: and LDA/QDA gather their co-moments in the long shape
#: (:func:`sqlnb.models.discriminant.long_moments_query`). Below it the per-term shape is
#: kept, and with it the SQL of every model in ``sql/``.
LIST_MIN = 32
#: The prelude's columns: the row's ``x_j − r_j`` as a list, and whether every feature is a
#: finite number (:func:`complete`, written once instead of once per class and model).
LIST_COLUMN, COMPLETE_COLUMN = "sqlnb_dense", "sqlnb_complete"


def plan_features(
    source: Source,
    label: str,
    features: Sequence[str] | None,
    exclude: Sequence[str] | None,
    what: str,
) -> dict[str, str]:
    """The numeric feature columns of a dense model, name -> SQL type, in source order.

    Default: every column but the label. A column that is not numeric or boolean
    raises (rather than being dropped silently), naming the fix.
    """
    source.require([label], "label column")
    for name in list(features or []) + list(exclude or []):
        source.require([name], "feature column")
    if features is not None and exclude:
        raise SqlnbError("give either the features to use or the ones to exclude, not both")
    names = list(features) if features is not None else [
        c for c in source.columns if c != label and c not in set(exclude or [])]
    if label in names:
        raise SqlnbError(f"column {label!r} cannot be both a feature and the label")
    if len(set(names)) != len(names):
        raise SqlnbError(f"feature columns are listed twice: {sorted({n for n in names if names.count(n) > 1})}")
    out = {}
    for name in names:
        t = source.columns[name]
        if not (is_numeric(t) or t.upper() == "BOOLEAN"):
            raise SqlnbError(
                f"column {name!r} in {source.description} has type {t}, but {what} needs numeric "
                f"features; leave it out (exclude=[{name!r}], --exclude {shell_word(name)}) or encode it as numbers "
                "in a source query"
            )
        out[name] = t
    if not out:
        raise SqlnbError(f"{source.description} has no feature column besides the label")
    return out


def value(name: str, sql_type: str | None = None) -> exp.Expression:
    """Feature ``name`` (of SQL type ``sql_type``) of the source alias ``src`` as DOUBLE
    (a BOOLEAN through INT, :func:`sqlnb.sql.as_double`)."""
    return sql.as_double(sql.col(name, "src"), sql_type)


def complete(features: Mapping[str, str]) -> exp.Expression:
    """TRUE when every feature is a finite number, NULL or FALSE otherwise.

    Float columns test :func:`sqlnb.sql.finite` (false for NaN and ±inf); other numeric
    and boolean columns can only be NULL, tested by ``x IS NOT NULL``.
    """
    conds = []
    for name, t in features.items():
        if is_float(t):
            conds.append(sql.finite(value(name)))
        else:
            conds.append(exp.Not(this=exp.Is(this=sql.col(name, "src"), expression=exp.Null())))
    return exp.and_(*conds) if len(conds) > 1 else conds[0]


def guarded(features: Mapping[str, str], score: exp.Expression) -> exp.Expression:
    """``CASE WHEN <complete row> THEN score END``: NULL for rows that cannot be scored."""
    return exp.Case(ifs=[exp.If(this=complete(features), true=score)])


def linear_terms(features: Mapping[str, str], centre: np.ndarray, coef: np.ndarray, intercept: float) -> list[exp.Expression]:
    """The terms of ``Σ_j (x_j − centre_j)·coef_j + intercept`` over the source alias ``src``:
    the intercept, then one per feature.

    Centring first keeps the products small when a column's values are far from zero
    (``x·a + b`` with a large ``b`` cancels in the log-sum-exp); zero coefficients are
    skipped.
    """
    terms = linear_feature_terms(features, centre, coef, intercept)
    return [terms.base, *(t for t, a in zip(terms.terms, coef) if a != 0.0)]


def linear_feature_terms(features: Mapping[str, str], centre: np.ndarray, coef: np.ndarray,
                         intercept: float) -> FeatureTerms:
    """:func:`linear_terms` with one term per feature (``0.0`` for a zero coefficient), for
    explanations: feature ``j`` contributes ``(x_j − centre_j)·coef_j``."""
    terms: list[exp.Expression] = []
    for j, (name, sql_type) in enumerate(features.items()):
        a = float(coef[j])
        if a == 0.0:
            terms.append(sql.dbl(0.0))
            continue
        x = value(name, sql_type)
        d = exp.Sub(this=x, expression=sql.dbl(float(centre[j]))) if centre[j] != 0 else x
        terms.append(exp.Mul(this=sql.paren(d), expression=sql.dbl(a)))
    return FeatureTerms(sql.dbl(float(intercept)), tuple(terms))


def linear_class_score(features: Mapping[str, str], centre: np.ndarray, coef: np.ndarray,
                       intercept: float) -> ClassScore:
    """:func:`linear_terms` as a class score, NULL for rows that cannot be scored (:func:`guarded`)."""
    return ClassScore(tuple(linear_terms(features, centre, coef, intercept)), guard=complete(features))


def listed(features: Mapping[str, str], dialect: str | None, dot: bool | None = None) -> bool:
    """Whether the class scores take the list shape: in DuckDB (or where ``dot`` says so)
    from :data:`LIST_MIN` features on."""
    return (dialect == "duckdb" if dot is None else bool(dot)) and len(features) >= LIST_MIN


def differences(features: Mapping[str, str], reference: np.ndarray) -> exp.Array:
    """``[COALESCE(x_1 − r_1, 0), …]``: the prelude's list (each column written once)."""
    return exp.Array(expressions=[exp.Coalesce(this=exp.Sub(this=value(n, t), expression=sql.dbl(float(r))),
                                               expressions=[sql.dbl(0.0)])
                                  for (n, t), r in zip(features.items(), reference)])


def list_dot(weights: np.ndarray) -> exp.Expression:
    """``list_dot_product(src.sqlnb_dense, [w…])``, the weights as one packed literal."""
    return exp.Anonymous(this="list_dot_product", expressions=[
        sql.col(LIST_COLUMN, "src"), sql.packed_list([float(w) for w in weights], "DOUBLE")])


def linear_list_score(features: Mapping[str, str], reference: np.ndarray, centre: np.ndarray, coef: np.ndarray,
                      intercept: float) -> ClassScore:
    """:func:`linear_class_score` over the prelude's list ``v = x − r``::

        (x − m)·a + c = v·a + [c + (r − m)·a]

    (the bracket is ``c`` itself when ``r`` is the centre ``m``, as in a model's own
    scoring query; cross-validation passes one ``r`` for every fold model)."""
    coef = np.asarray(coef, dtype=float)
    base = float(intercept) + float(np.dot(np.asarray(reference) - np.asarray(centre), coef))
    terms = (sql.dbl(base),) + ((list_dot(coef),) if np.any(coef != 0.0) else ())
    return ClassScore(terms, guard=list_guard())


def list_guard() -> exp.Expression:
    """The prelude's :data:`COMPLETE_COLUMN`: the guard of a class score in the list shape."""
    return sql.col(COMPLETE_COLUMN, "src")


def check_labels(rows_by_class: Mapping[Any, Any], label: str, where: str, null_rows: int) -> list:
    """Sorted classes of a label column; raises for NaN labels, no rows or one class."""
    classes = [c for c in rows_by_class if c is not None]
    if any(isinstance(c, float) and math.isnan(c) for c in classes):
        raise SqlnbError(f"label column {label!r} in {where} holds NaN; use NULL for unlabelled rows")
    if not classes:
        if null_rows:
            raise SqlnbError(f"label column {label!r} in {where} is NULL in all {null_rows} rows; nothing to learn from")
        raise SqlnbError(f"{where} has no rows; nothing to learn from")
    classes.sort(key=_sort_key)
    if len(classes) < 2:
        raise SqlnbError(
            f"label column {label!r} in {where} has only one class ({classes[0]!r}); a classifier needs at least two")
    return classes


def read_rows(
    con: duckdb.DuckDBPyConnection,
    source: Source,
    label: str,
    features: Mapping[str, str],
    extra: Mapping[str, exp.Expression] | None = None,
) -> tuple[list, np.ndarray, dict[str, np.ndarray], int]:
    """Read the labelled rows once into numpy (logistic regression is fitted in Python).

    Returns ``(labels, X, extras, null_label_rows)``: the label of each row, the
    ``(n, d)`` float matrix of features, the ``extra`` expressions evaluated per row
    (e.g. a fold number) and the number of rows skipped for a NULL label.
    """
    import pyarrow.compute as pc
    extra = dict(extra or {})
    cols = [exp.alias_(sql.col(label, "src"), "k", quoted=True)]
    cols += [exp.alias_(value(f, source.columns[f]), f"x{j}", quoted=True) for j, f in enumerate(features)]
    cols += [exp.alias_(e, f"e{j}", quoted=True) for j, e in enumerate(extra.values())]
    import pyarrow as pa

    engine = as_engine(con)
    query = exp.select(*cols).from_(source.from_("src"))
    if isinstance(engine, DuckDBEngine):
        table = engine.relation(query).to_arrow_table()
    else:  # PostgreSQL / Spark: the rows come back once, as tuples
        rows = engine.execute(query)
        names = ["k"] + [f"x{j}" for j in range(len(features))] + [f"e{j}" for j in range(len(extra))]
        table = pa.table({n: pa.array([r[i] for r in rows]) for i, n in enumerate(names)})
    labelled = pc.is_valid(table.column("k"))
    null_rows = len(table) - int(pc.sum(labelled).as_py() or 0)
    table = table.filter(labelled)
    labels = table.column("k").to_pylist()
    X = np.empty((len(table), len(features)))
    for j, name in enumerate(features):
        column = table.column(f"x{j}")
        if column.null_count:
            raise SqlnbError(
                f"column {name!r} in {source.description} is NULL in {column.null_count} labelled rows; "
                f"{_complete_rows_hint(name)}")
        X[:, j] = to_numpy(column)
        if not np.all(np.isfinite(X[:, j])):
            raise SqlnbError(
                f"column {name!r} in {source.description} holds NaN or infinite values; "
                f"{_complete_rows_hint(name)}")
    extras = {name: to_numpy(table.column(f"e{j}")) for j, name in enumerate(extra)}
    return labels, X, extras, null_rows


def to_numpy(column) -> np.ndarray:
    """A pyarrow ChunkedArray as a numpy array (a copy).

    An integer or floating-point column without NULLs is read from its value buffers
    (:func:`sqlnb.store.arrow.numbers`): the same values as ``column.to_numpy()``, but
    pyarrow's own conversion imports pandas (to check for it), ~40 MiB and 0.27 CPU s of a
    process that never uses pandas (``sqlnb compare`` on 10,000 rows went over
    300 MiB with it, and every fit paid the import). Other columns take pyarrow's
    conversion.
    """
    import pyarrow as pa

    from sqlnb.store import arrow

    t = column.type
    if column.null_count or not (pa.types.is_floating(t) or pa.types.is_integer(t)):
        return column.to_numpy(zero_copy_only=False)
    return arrow.numbers(column)


def _complete_rows_hint(name: str) -> str:
    return (f"LDA, QDA and logistic regression need complete rows: filter them (WHERE \"{name}\" IS NOT NULL "
            "AND isfinite(...)) or impute in a source query")


def null_feature_error(name: str, where: str, count: int | None = None) -> SqlnbError:
    many = f" in {count} labelled rows" if count is not None else ""
    return SqlnbError(f"column {name!r} in {where} is NULL{many}; {_complete_rows_hint(name)}")


def nonfinite_feature_error(name: str, where: str) -> SqlnbError:
    return SqlnbError(f"column {name!r} in {where} holds NaN or infinite values; {_complete_rows_hint(name)}")


def unsummable_error(engine: Any, source: Source, label: str, name: str, cls: Any, what: str) -> SqlnbError:
    """The error for column ``name`` whose ``what`` (mean or variance) in class ``cls`` came
    back NaN or infinite: NaN or ±inf values in the data, or finite values whose moments
    overflowed a double (told apart by :func:`sqlnb.stats.census_query`)."""
    census = as_engine(engine).execute(census_query(source, label, value(name, source.columns[name])))
    if nonfinite_values(census) is not None:
        return nonfinite_feature_error(name, source.description)
    return overflow_error(name, source.description, cls, census, what)


class DenseModel(Model):
    """Base of LDA, QDA and logistic regression (see the module docstring).

    Attributes
    ----------
    features : dict of str to str
        Feature column -> its SQL type at fit time, in model order.
    """

    label: str
    label_type: str
    features: dict[str, str]
    report: dict

    @property
    def feature_names(self) -> list[str]:
        return list(self.features)

    def reference(self) -> np.ndarray:
        """``r``, about which the list shape reads the values (module docstring)."""
        raise NotImplementedError

    def score_prelude(self, input_types: Mapping[str, str] | None = None, dialect: str | None = None,
                      dot: bool | None = None, reference: np.ndarray | None = None) -> list[tuple[str, exp.Expression]]:
        """The list ``x − r`` (``r`` the model's :meth:`reference` unless given; NULL read
        as 0) and the row's :func:`complete` test, in the list shape (:func:`listed`);
        else none."""
        if not listed(self.features, dialect, dot):
            return []
        values = differences(self.features, self.reference() if reference is None else reference)
        return [(LIST_COLUMN, values), (COMPLETE_COLUMN, complete(self.features))]

    def _class_table(self, **columns) -> Any:
        """The ``classes`` part: class index, typed label and any per-class columns."""
        import pyarrow as pa

        from sqlnb.store import arrow  # arrow.array: pyarrow.array without importing pandas
        data = {"class_index": arrow.array(range(len(self.classes)), pa.int32()),
                "label": arrow.array(list(self.classes))}
        data.update({k: arrow.array(np.asarray(v, dtype=float), pa.float64()) for k, v in columns.items()})
        return pa.table(data), {"label": self.label_type}

    def _base_metadata(self) -> dict:
        return {"label": self.label, "label_type": self.label_type,
                "features": [{"name": n, "sql_type": t} for n, t in self.features.items()],
                "report": self.report}

    @staticmethod
    def _features_from(meta: dict) -> dict[str, str]:
        return {f["name"]: f["sql_type"] for f in meta["features"]}

    @staticmethod
    def _classes_from(tables: dict) -> tuple[list, dict]:
        ct = tables["classes"].sort_by("class_index").to_pydict()
        return ct["label"], ct


def packed_matrix(rows: np.ndarray) -> exp.Expression:
    """``CAST('[[…], …]' AS DOUBLE[][])`` (DuckDB): a matrix as one string literal of
    shortest round-trip ``repr`` values (DuckDB parses back the same doubles, as
    :func:`sqlnb.sql.packed_list`)."""
    text = "[" + ",".join("[" + ",".join(repr(float(w)) for w in row) + "]" for row in rows) + "]"
    return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("DOUBLE[][]", dialect="duckdb"))


def squared_norm(whiten: np.ndarray, offset: np.ndarray) -> exp.Expression | None:
    """``Σ_m (v·W_m − o_m)²`` over the prelude's list ``v`` in a few list expressions
    (DuckDB), the same doubles as :meth:`sqlnb.models.discriminant.QDA.class_terms`'s
    list shape: each square is ``POWER(list_dot_product(v, W_m) − o_m, 2.0)``, and they are
    added in :func:`sqlnb.sql.add`'s order (left to right within runs of ``ADD_RUN``
    terms, then the runs left to right): ``list_reduce`` folds a list from the left. None
    past ``ADD_RUN``² terms (runs of runs).

    Why: there, each ``z_m`` is a ``list_dot_product`` node of its own, and DuckDB gives
    every node of a running expression, in every thread, intermediate vectors of 2,048
    rows (a ``DOUBLE[]`` argument alone: 48 KB). Cross-validation of QDA on 104 one-hot
    columns of adult (5 fold models × 2 classes × 104 nodes) spent ~125 MiB of its
    319 MiB peak on them; here it is one ``list_transform`` per run and class.
    """
    d = len(offset)
    if d > ADD_RUN ** 2:
        return None
    w, i, a, b = (sql.ident(n) for n in ("sqlnb_w", "sqlnb_i", "sqlnb_a", "sqlnb_b"))
    runs = []
    for start in range(0, d, ADD_RUN):
        stop = min(start + ADD_RUN, d)
        z = exp.Sub(this=exp.Anonymous(this="list_dot_product", expressions=[sql.col(LIST_COLUMN, "src"), w.copy()]),
                    expression=exp.Anonymous(this="list_extract", expressions=[
                        sql.packed_list([float(o) for o in offset[start:stop]], "DOUBLE"), i.copy()]))
        square = exp.Lambda(this=exp.Pow(this=sql.paren(z), expression=sql.dbl(2.0)), expressions=[w.copy(), i.copy()])
        squares = exp.Anonymous(this="list_transform", expressions=[packed_matrix(whiten[start:stop]), square])
        plus = exp.Lambda(this=exp.Add(this=a.copy(), expression=b.copy()), expressions=[a.copy(), b.copy()])
        runs.append(exp.Anonymous(this="list_reduce", expressions=[squares, plus]))
    # sql.add's runs are parenthesised sums chained left to right: the same here.
    out = runs[0]
    for run in runs[1:]:
        out = exp.Add(this=out, expression=run)
    return out
