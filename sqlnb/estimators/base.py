"""What every sqlnb estimator shares: input checks, fit, partial_fit, scoring, export.

An estimator is a thin scikit-learn face on a :class:`~sqlnb.models.base.Model`: ``fit``
hands the rows to :func:`sqlnb.fit` (or ``fit_lda``, ``fit_qda``, ``fit_logistic``) on
an in-process DuckDB connection, and keeps the fitted model as ``model_``; the
``predict*`` methods run the model's scoring SELECT over the new rows. The model is its
sufficient statistics, so pickling, cloning and ``partial_fit`` (an exact merge of the
statistics) need no connection: the pickle holds ``model_``'s numbers, never a connection
(:func:`sqlnb.estimators.data.connection` is per thread and made on first use).

Column names: a frame's own, or ``x0 .. x{d-1}`` for an array (the names the exported
SQL reads, ``to_sql``). The label column is ``y`` (``y_1``, ... when a feature has that
name).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pyarrow as pa
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (_check_feature_names, _check_sample_weight, check_is_fitted,
                                      column_or_1d, validate_data)

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.estimators import counts, data, moments
from sqlnb.estimators.data import EstimatorInputError
from sqlnb.models.naive_bayes import wide
from sqlnb.sql.types import is_numeric
from sqlnb.source import Table, resolve
from sqlnb.stats import sorted_values

#: Rendered scoring SELECTs per fitted model (see ``SqlnbClassifier._scores``).
_SCORING_SQL: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: Up to this many rows a naive Bayes model's Gaussian and Bernoulli columns are scored in
#: the exact list shape (:func:`sqlnb.models.naive_bayes.wide.exact_lists`): its SELECT
#: binds in a fraction of the per-term shape's time, but its lambdas cost more per row.
#: Measured (benchmarks/README.md, "scikit-learn estimators"): 20 columns x 3 classes,
#: the two cost the same near 100,000 rows and the per-term shape is twice as fast at 1M;
#: 64 columns x 10 classes, the list shape is twice as fast at 100,000 rows.
EXACT_ROWS = 100_000


class SqlnbClassifier(ClassifierMixin, BaseEstimator):
    """Base class of the sqlnb estimators (not used directly).

    Attributes (after ``fit``)
    ----------
    model_ : sqlnb Model
        The fitted library model (:class:`~sqlnb.models.naive_bayes.model.NaiveBayes`,
        :class:`~sqlnb.LDA`, :class:`~sqlnb.QDA` or :class:`~sqlnb.Logistic`).
    classes_ : ndarray
        The class labels, sorted.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had column names (a DataFrame or Arrow table).
    """

    #: NaN (and NULL) inputs are missing values the model marginalises (naive Bayes); the
    #: dense kinds need complete rows.
    _allow_nan = True
    #: X must hold numbers (all but the categorical and mixed estimators).
    _numeric = True
    #: Rows may be weighted (naive Bayes: counts and moments are weighted sums). The dense
    #: kinds' statistics are of unweighted rows: their ``fit`` has no ``sample_weight``
    #: (scikit-learn's convention: passing one is a TypeError naming it, and meta-estimators
    #: such as CalibratedClassifierCV know not to pass one).
    _weighted = True
    #: A C-ordered numpy X is handed to DuckDB as one fixed-size-list column, no copy
    #: (:func:`sqlnb.estimators.data.array_to_arrow`; ``"copy"``: any numeric array, a
    #: column-major one after one row-major copy); with NaN in it, only where
    #: ``_packed_nan``. Count and Bernoulli models read the packed rows as they are, to
    #: fit and to score (:mod:`sqlnb.estimators.counts`); the general path reads them
    #: through a view naming each column, slower than columns for count models (1M x 20
    #: MultinomialNB fit + predict_proba 2.40 s against 1.94 s, load 17), so those lay an
    #: array with NaN (which takes that path) out column-major.
    _packed: bool | str = True
    _packed_nan = True

    # -- what a subclass provides ---------------------------------------------------------
    def _fit_model(self, con, name: str, label: str, features: list[str], weight: str | None):
        raise NotImplementedError

    def _merge(self, con, name: str, label: str, features: list[str], weight: str | None):
        """``model_`` merged with the statistics of the rows registered as ``name``."""
        raise NotImplementedError

    @classmethod
    def from_model(cls, model) -> "SqlnbClassifier":
        """An estimator of this class holding a fitted (or loaded) library ``model``:
        :func:`sqlnb.estimators.load` picks the class. Its features are read by name."""
        estimator = cls()
        names = list(model.feature_names)
        estimator.n_features_in_ = len(names)
        if names != [f"x{j}" for j in range(len(names))]:
            estimator.feature_names_in_ = np.array(names, dtype=object)
        estimator._set_model(model, np.array(model.classes))
        return estimator

    def _fit_packed(self, table: pa.Table, names: list[str], label: str, weight: str | None):
        """The model fitted from packed rows (:mod:`sqlnb.estimators.counts`) where the
        family has such a path and the rows allow it; None: the general path."""
        return None

    def _check_table(self, table: pa.Table, names: list[str]) -> None:
        """Checks of the input a family needs before its statistics are computed."""

    def _align(self, model, classes: list):
        """``model`` over the class list ``classes`` (declared classes without rows)."""
        return model

    # -- input ------------------------------------------------------------------------------
    def _table(self, X: Any, reset: bool) -> tuple[pa.Table, list[str]]:
        """``X`` as an Arrow table and its feature column names, checked against the fit."""
        if data.is_frame(X):
            table = data.frame_to_arrow(X)
            _check_feature_names(self, X if type(X).__module__.startswith("pandas") else table, reset=reset)
            names = [str(c) for c in table.column_names]
            if reset:
                self.n_features_in_ = len(names)
            elif len(names) != self.n_features_in_:
                raise EstimatorInputError(f"X has {len(names)} features, but {type(self).__name__} is expecting "
                                          f"{self.n_features_in_} features as input")
            if table.num_rows == 0:
                raise EstimatorInputError("X has 0 rows; a minimum of 1 is required")
            if self._numeric:
                for field in table.schema:
                    t = str(field.type)
                    if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
                            or pa.types.is_boolean(field.type) or pa.types.is_decimal(field.type)):
                        raise EstimatorInputError(f"column {field.name!r} of X has type {t}; "
                                                  f"{type(self).__name__} needs numbers (cast it, or use MixedNB)")
            if not reset and hasattr(self, "feature_names_in_"):
                names = list(self.feature_names_in_)
                table = table.select(names)
            return table, names
        X = validate_data(self, X, reset=reset, dtype="numeric" if self._numeric else None,
                          ensure_all_finite="allow-nan" if self._allow_nan else True)
        # An array scored by a model fitted on a frame is read under the frame's names
        # (scikit-learn has warned that X has no feature names).
        fitted = getattr(self, "feature_names_in_", None)
        names = [str(n) for n in fitted] if fitted is not None and not reset else [f"x{j}" for j in range(X.shape[1])]
        return data.array_to_arrow(X, names, packed=self._packed, packed_nan=self._packed_nan), names

    def _labels(self, y: Any, n_rows: int) -> np.ndarray:
        if y is None:
            raise EstimatorInputError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        y = column_or_1d(data.column_to_numpy(y), warn=True)
        check_classification_targets(y)
        if len(y) != n_rows:
            raise EstimatorInputError(f"Found input variables with inconsistent numbers of samples: [{n_rows}, {len(y)}]")
        if y.dtype.kind == "f" and np.isnan(y).any():
            raise EstimatorInputError("Input y contains NaN; every training row needs a label")
        return y

    def _with_label(self, table: pa.Table, names: list[str], y: np.ndarray, sample_weight) -> tuple:
        label = data.unused_name("y", names)
        columns = data.columns(table, names)
        try:
            columns[label] = pa.array(y.tolist() if y.dtype.kind == "O" else y)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise EstimatorInputError(f"the labels y cannot be one column ({e}); give labels of one type") from None
        weight = None
        if sample_weight is not None:
            w = _check_sample_weight(sample_weight, np.empty((len(y), 0)), ensure_non_negative=True)
            weight = data.unused_name("w", [*names, label])
            columns[weight] = pa.array(w)
        return pa.table(columns), label, weight

    # -- fitting ------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "SqlnbClassifier":
        """Fit the model on ``X``, ``y`` (one scan of the rows in DuckDB).

        Parameters
        ----------
        X : array-like (n_samples, n_features), pandas/Polars DataFrame, pyarrow Table or DuckDB relation
        y : array-like (n_samples,) or a column of any of those libraries
        sample_weight : array-like (n_samples,), optional
            Row weights (naive Bayes: exact weighted counts and moments, as scikit-learn's).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def _fit(self, X: Any, y: Any, sample_weight: Any = None) -> "SqlnbClassifier":
        for attr in ("model_", "classes_", "_declared"):
            self.__dict__.pop(attr, None)
        table, names = self._table(X, reset=True)
        y = self._labels(y, table.num_rows)
        self._check_table(table, names)
        table, label, weight = self._with_label(table, names, y, sample_weight)
        model = self._call(self._fit_packed, table, names, label, weight) if data.is_packed(table) else None
        if model is not None:
            # Its classes are y's distinct values, sorted (np.unique's order for numbers
            # and text): no second pass over y (1M labels: 13 ms).
            self._set_model(model, np.asarray(model.classes, dtype=y.dtype))
            return self
        # Up to EXACT_ROWS rows, many Gaussian and Bernoulli columns are summed in the long
        # shape (wide.long_min): digits' 64 columns x 10 classes as one aggregate each took
        # DuckDB longer to plan than the rows take to unnest.
        with data.registered(table, names) as (con, name), wide.exact_lists(table.num_rows <= EXACT_ROWS):
            model = self._call(self._fit_model, con, name, label, names, weight)
        self._set_model(model, np.unique(y))
        return self

    def _partial_fit(self, X: Any, y: Any, classes: Any = None, sample_weight: Any = None) -> "SqlnbClassifier":
        first = not hasattr(self, "model_")
        table, names = self._table(X, reset=first)
        y = self._labels(y, table.num_rows)
        if first and classes is not None:
            self._declared = np.unique(column_or_1d(np.asarray(classes)))
        declared = getattr(self, "_declared", None)
        if declared is not None:
            unknown = np.setdiff1d(np.unique(y), declared)
            if len(unknown):
                raise EstimatorInputError(f"the labels {unknown.tolist()} in y are not among the classes "
                                          f"{declared.tolist()} given to the first partial_fit")
        elif classes is not None and not first and set(np.unique(classes).tolist()) != set(self.classes_.tolist()):
            raise EstimatorInputError("classes must be the same on every partial_fit call (or only on the first)")
        if first and self._weighted and sample_weight is None:
            # A weight column from the start, so that a later batch may carry weights.
            sample_weight = np.ones(len(y))
        elif not first and sample_weight is None and getattr(self.model_, "weight", None) is not None:
            sample_weight = np.ones(len(y))
        elif not first and sample_weight is not None and self._weighted and self.model_.weight is None:
            raise EstimatorInputError("this model was fitted without sample_weight, so partial_fit cannot add weighted "
                                      "rows to it; fit it with sample_weight (ones) first")
        self._check_table(table, names)
        table, label, weight = self._with_label(table, names, y, sample_weight)
        with data.registered(table, names) as (con, name):
            if first:
                model = self._call(self._fit_model, con, name, label, names, weight)
            else:
                model = self._call(self._merge, con, name, label, names, weight)
        seen = np.unique(y) if first else np.unique(np.concatenate([self.classes_, np.unique(y)]))
        self._set_model(model, seen if declared is None else np.unique(np.concatenate([declared, seen])))
        return self

    def _call(self, step, *args):
        try:
            return step(*args)
        except EstimatorInputError:
            raise
        except SqlnbError as e:
            raise EstimatorInputError(str(e)) from None

    def _set_model(self, model, classes: np.ndarray) -> None:
        """Keep ``model`` over ``classes`` (declared classes added where the kind can hold
        a class without rows: naive Bayes; LDA and QDA need a mean, so they keep the
        classes that have rows until rows of the others arrive)."""
        wanted = classes.tolist()
        if set(map(_key, model.classes)) != set(map(_key, wanted)):
            model = self._call(self._align, model, sorted_values(wanted))
        index = {_key(c): k for k, c in enumerate(model.classes)}
        kept = np.array([_key(c) in index for c in wanted], dtype=bool)
        self.model_ = model
        self.classes_ = classes[kept]
        self._order = np.array([index[_key(c)] for c, k in zip(wanted, kept) if k], dtype=int)

    # -- scoring ------------------------------------------------------------------------------
    def _scores(self, X: Any, output: str) -> np.ndarray:
        """Per row and class (``classes_`` order), the log-probability (``output`` =
        ``"log_proba"``) or the probability (``"proba"``), from one run of the model's
        scoring SELECT in DuckDB that computes only that output (1M rows x 3 classes:
        fetching both and stacking them took 0.9 s of a predict_proba at load 24)."""
        check_is_fitted(self, "model_")
        table, names = self._table(X, reset=False)
        if data.is_packed(table):  # a model of count columns: one dot product per class
            try:
                fast = counts.scores(self.model_, table, names, output)
                if fast is None:  # a Gaussian model: one lambda per row over the classes
                    fast = moments.scores(self.model_, table, names, output)
            except SqlnbError as e:
                raise EstimatorInputError(str(e)) from None
            if fast is not None:  # in classes_ order (no copy when it is the model's: 1M x 3, 24 MB)
                return fast if np.array_equal(self._order, np.arange(fast.shape[1])) else fast[:, self._order]
        # The scoring SELECT reads the input under one name, so its text depends only on
        # the model, the output and the input's column types: built and rendered once per
        # fitted model (sqlglot's part of a small predict is most of it), then only run.
        # Kept beside the estimator (keyed by the model object), not in it: predict
        # changes no attribute.
        texts = _SCORING_SQL.setdefault(self.model_, {})
        exact = table.num_rows <= EXACT_ROWS
        key = (output, exact, *(str(t) for t in table.schema.types))
        with data.registered(table, names) as (con, name):
            try:
                text = texts.get(key)
                if text is None:
                    with wide.exact_lists(exact):
                        text = texts[key] = _scoring_text(self.model_, resolve(Table(name), con), output)
                result = con.sql(text).to_arrow_table()
            except SqlnbError as e:
                raise EstimatorInputError(str(e)) from None
        cols = [c.to_numpy(zero_copy_only=False) for c in result.columns]
        return np.column_stack(cols)[:, self._order]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, (n_samples, n_classes) in ``classes_`` order, computed in DuckDB."""
        return self._scores(X, "proba")

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Log class probabilities, (n_samples, n_classes), computed in DuckDB."""
        return self._scores(X, "log_proba")

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class per row (the first of equally probable ones)."""
        check_is_fitted(self, "model_")
        return self.classes_[np.argmax(self._scores(X, "log_proba"), axis=1)]

    # -- export -------------------------------------------------------------------------------
    def to_sql(self, dialect: str = "duckdb", source: Any = None, **kwargs: Any) -> str:
        """The fitted model's scoring SELECT (see :meth:`sqlnb.models.base.Model.to_sql`); it
        reads the feature columns by name (``x0 ..`` for a model fitted on an array)."""
        check_is_fitted(self, "model_")
        return self.model_.to_sql(dialect=dialect, source=source, **kwargs)

    def save(self, location: Any, name: str = "model", replace: bool = False) -> None:
        """Save the fitted model as tables in a DuckDB database (a path or connection);
        :func:`sqlnb.estimators.load` gives back an estimator, :func:`sqlnb.load` the model."""
        check_is_fitted(self, "model_")
        self.model_.save(location, name, replace=replace)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self._allow_nan
        tags.input_tags.string = not self._numeric
        tags.input_tags.categorical = not self._numeric
        return tags


@sql.trees_collected_by_refcount
def _scoring_text(model, source, output: str = "proba") -> str:
    """The model's DuckDB scoring SELECT over ``source`` (``output``: one column per class
    in the model's class order), as text."""
    return sql.render(model.scoring_query(source, (output,), keep=[], nan_gate=True, dialect="duckdb"), "duckdb")


def _key(value: Any):
    """A class label compared across numpy and DuckDB (np.int64(1) and 1 alike)."""
    return value.item() if isinstance(value, np.generic) else value
