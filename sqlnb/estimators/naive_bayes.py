"""Naive Bayes estimators: one per family a scikit-learn user knows, plus mixed and TAN.

Each is :func:`sqlnb.fit` with the family (``kind``) fixed and the library's
hyperparameters (:class:`~sqlnb.models.naive_bayes.hyperparameters.Hyperparameters`) as
``__init__`` keywords; the fitted statistics are exposed under scikit-learn's attribute
names where it has them (``class_count_``, ``theta_``, ``var_``, ``feature_count_``,
``feature_log_prob_``, ``category_count_``, ...).

Where sqlnb and scikit-learn differ:

* ``partial_fit`` is the library's exact update (:func:`sqlnb.update`): after any
  sequence of batches the model equals ``fit`` on all rows. scikit-learn's GaussianNB
  keeps the variance floor of its first batch; here it is the refit's.
* ``partial_fit`` without ``classes`` on the first call accepts classes that arrive
  later (they are added); with ``classes``, a label outside them is an error as in
  scikit-learn.
* NaN (and NULL) features are missing values: they contribute no term, at fit and at
  predict (scikit-learn rejects them).
* CategoricalNB takes any values (numbers or text) as categories, smoothing over the
  categories seen in training (scikit-learn's over ``0 .. max``); its probabilities are
  scikit-learn's when every category ``0 .. max`` occurs.
* ``sample_weight`` is exact (weighted counts and moments); the Gaussian variance floor
  is taken from the unweighted variances, as scikit-learn's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.metaestimators import available_if

from sqlnb import api
from sqlnb.estimators import counts, data, moments
from sqlnb.estimators.base import SqlnbClassifier
from sqlnb.errors import VarianceFloorWarning, warn
from sqlnb.estimators.data import EstimatorInputError
from sqlnb.models.naive_bayes.families.gaussian import floor_lifter
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.workflows.generative import update

#: The variance floor's notes given so far in this process (each text once: _note_floor).
_FLOOR_NOTES: set[str] = set()

#: Estimator parameters that are fields of Hyperparameters (None: the library's default).
_HYPER = ("alpha", "feature_alpha", "beta", "estimator", "class_prior", "prior_alpha", "var_smoothing", "norm",
          "unseen", "tied_variance")


class _NaiveBayes(SqlnbClassifier):
    _kind = "auto"
    _structure = "naive"

    def _hyper(self) -> dict:
        params = self.get_params(deep=False)
        hyper = {k: params[k] for k in _HYPER if k in params and params[k] is not None}
        if isinstance(hyper.get("class_prior"), np.ndarray):
            hyper["class_prior"] = tuple(hyper["class_prior"].tolist())
        if self._structure != "naive":
            hyper["structure"] = self._structure
        return hyper

    def _fit_options(self) -> dict:
        params = self.get_params(deep=False)
        out = {k: params[k] for k in ("binarize", "bins", "select_k") if params.get(k) is not None}
        if params.get("feature_kinds") is not None:
            out["feature_kinds"] = dict(params["feature_kinds"])
        return out

    def _fit_model(self, con, name, label, features, weight):
        kind = getattr(self, "kind", self._kind)
        return api.fit(name, label, con=con, kind=kind, features=features, screen=False, weight=weight,
                       floor_note=False, **self._fit_options(), **self._hyper())

    def _fit(self, X: Any, y: Any, sample_weight: Any = None) -> "_NaiveBayes":
        super()._fit(X, y, sample_weight)
        self._note_floor()
        return self

    def _note_floor(self) -> None:
        """A :class:`~sqlnb.errors.VarianceFloorWarning` when one Gaussian column of X
        lifts the variance floor above other columns' variances (the note ``sqlnb fit``
        gives, :func:`~sqlnb.models.naive_bayes.families.gaussian.floor_lifter`), naming
        what an estimator's user can do. Its text holds no figure of the fitted rows, so
        that the folds of a search give one text, which is warned once per process.

        Python's own ``"default"`` and ``"once"`` actions cannot do that here: they
        remember a text in the module's ``__warningregistry__``, which every change of
        the filters clears, and scikit-learn's parallel helper sets the filters again
        around each fit of a search (``sklearn.utils.parallel._FuncWrapper``), so its
        own warnings (a ConvergenceWarning) come again from every fold. The texts already
        warned are kept in :data:`_FLOOR_NOTES`; the warning itself goes through
        :func:`sqlnb.errors.warn` (:func:`warnings.warn`), so filters and ``pytest.warns`` see it."""
        m = self.model_
        found = floor_lifter(m.features, m.stats.features, m.hyper.var_smoothing)
        if found is None:
            return
        top, _, _, below = found
        named = hasattr(self, "feature_names_in_")

        def col(name: str) -> str:
            return repr(name) if named else f"X[:, {name[1:]}]"  # an array's columns are x0, x1, ...

        shown = ", ".join(col(n) for n, _ in below[:3]) + (", ..." if len(below) > 3 else "")
        text = (f"{type(self).__name__}: column {col(top)} sets the Gaussian variance floor (var_smoothing × its "
                f"variance) above the variance of {len(below)} other column{'s' * (len(below) > 1)} ({shown}), "
                f"whose class densities it flattens; drop that column from X (an ID read as a number does "
                f"this), rescale it, or give a smaller var_smoothing (now {m.hyper.var_smoothing:g})")
        if text not in _FLOOR_NOTES:
            _FLOOR_NOTES.add(text)
            warn(text, VarianceFloorWarning)

    def _merge(self, con, name, label, features, weight):
        return update(self.model_, name, con=con)

    def _fit_packed(self, table, names, label, weight):
        """Count and Bernoulli families fit from one aggregate over the packed rows
        (:func:`counts.fit`); one threshold for every column (``binarize`` a number)."""
        kind = getattr(self, "kind", self._kind)
        options = self._fit_options()
        threshold = options.pop("binarize", 0.0)
        if self._structure != "naive" or options or not isinstance(threshold, (int, float)):
            return None
        if kind == moments.GAUSSIAN:  # GaussianNB: sqlnb.estimators.moments
            return moments.fit(table, names, label, weight, self._hyper())
        return counts.fit(table, names, label, weight, kind, self._hyper(), float(threshold))

    def _align(self, model: NaiveBayes, classes: list) -> NaiveBayes:
        return NaiveBayes(model.label, model.label_type, model.features, model.stats.align(classes), model.hyper,
                          model.report, model.weight)

    def partial_fit(self, X: Any, y: Any, classes: Any = None, sample_weight: Any = None):
        """Add the rows ``X``, ``y`` to the model: exactly ``fit`` on every row given so far.

        Parameters
        ----------
        X, y, sample_weight
            As for :meth:`fit`.
        classes : array-like, optional
            Every class, on the first call (as scikit-learn asks); without it, classes
            first seen in a later batch are added.
        """
        return self._partial_fit(X, y, classes, sample_weight)

    # -- the fitted statistics under scikit-learn's names ----------------------------------------
    def _stack(self, what) -> np.ndarray:
        m = self.model_
        return np.column_stack([what(m.stats.features[f.name], f) for f in m.features])[self._order]

    @property
    def class_count_(self) -> np.ndarray:
        """Weighted rows per class."""
        return self.model_.stats.class_n[self._order]

    @property
    def class_log_prior_(self) -> np.ndarray:
        """ln π_c under ``class_prior``."""
        return self.model_.class_log_prior()[self._order]

    @property
    def feature_kinds_(self) -> dict:
        """Each feature column's family."""
        return {f.name: f.kind for f in self.model_.features}


class GaussianNB(_NaiveBayes):
    """Gaussian naive Bayes in the database (scikit-learn's ``GaussianNB``).

    Parameters
    ----------
    var_smoothing : float
        Variance floor as a fraction of the largest feature variance.
    tied_variance : bool
        One pooled within-class variance per feature (linear log-odds).
    class_prior : "fitted", "uniform", "dirichlet" or sequence of probabilities in class order
        scikit-learn's ``priors`` is a sequence here.
    prior_alpha : float
        Dirichlet concentration with ``class_prior="dirichlet"``.

    Attributes
    ----------
    theta_, var_ : ndarray (n_classes, n_features)
        Class means and variances (the floor ``epsilon_`` included, as scikit-learn's).
    class_count_, class_log_prior_, model_, classes_, n_features_in_, feature_names_in_
    """

    _kind = "gaussian"
    # Small arrays are packed whatever their layout (one row-major copy, as the general
    # path makes a column-major one): sqlnb.estimators.moments reads them.
    _packed = "small"

    def __init__(self, *, var_smoothing=1e-9, tied_variance=False, class_prior="fitted", prior_alpha=1.0):
        self.var_smoothing = var_smoothing
        self.tied_variance = tied_variance
        self.class_prior = class_prior
        self.prior_alpha = prior_alpha

    def _params(self, i: int) -> np.ndarray:
        p = self.model_.log_parameters()
        return np.column_stack([p[f.name][i] for f in self.model_.features])[self._order]

    @property
    def theta_(self) -> np.ndarray:
        return self._params(0)

    @property
    def var_(self) -> np.ndarray:
        return self._params(1)

    @property
    def epsilon_(self) -> float:
        """The variance floor added to every variance."""
        stats = self.model_.stats.features
        pooled = [stats[f.name].pooled() for f in self.model_.features]
        top = max((m2 / n if n > 0 else 0.0) for n, _, m2 in pooled)
        return float(self.var_smoothing * (top if top > 0 else 1.0))


class _Discrete(_NaiveBayes):
    # Packed rows (row-major: a column-major array is copied once, as the general path
    # copies a row-major one), read as they are by sqlnb.estimators.counts, unless they
    # hold NaN: that takes the general path, which reads counts faster as columns
    # (SqlnbClassifier._packed).
    _packed, _packed_nan = "copy", False

    def _check_table(self, table, names) -> None:
        """Counts are >= 0: the first negative value is named in scikit-learn's words
        ("Negative values in data") before any statistic is computed."""
        if self._kind not in ("multinomial", "complement") or data.packed_nonnegative(table):
            return
        for n, low in zip(names, data.column_minimums(table, names)):
            if low is not None and low < 0:
                raise EstimatorInputError(f"Negative values in data passed to {type(self).__name__}: column {n!r} "
                                          f"holds {low!r}; counts must be >= 0 (GaussianNB takes other numbers)")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True  # as scikit-learn's discrete naive Bayes
        return tags

    @property
    def feature_count_(self) -> np.ndarray:
        """Weighted sum of each feature per class (Bernoulli: rows where it is present)."""
        return self._stack(lambda s, f: s.total)

    @property
    def feature_log_prob_(self) -> np.ndarray:
        p = self.model_.log_parameters()
        pick = (lambda v: v[0]) if self._kind == "bernoulli" else (lambda v: v)
        return np.column_stack([pick(p[f.name]) for f in self.model_.features])[self._order]


class MultinomialNB(_Discrete):
    """Multinomial naive Bayes of counts in the database (scikit-learn's ``MultinomialNB``).

    Parameters
    ----------
    alpha : float
        Additive (Dirichlet) smoothing pseudo-count.
    feature_alpha : mapping column -> float, optional
        Per-column α (columns ``x0 ..`` for an array).
    estimator : {"posterior-mean", "map", "mle"}
        scikit-learn's rule is the posterior mean.
    class_prior : "fitted", "uniform", "dirichlet" or sequence of probabilities in class order
        ``"uniform"`` is scikit-learn's ``fit_prior=False``.
    prior_alpha : float
        Dirichlet concentration with ``class_prior="dirichlet"``.

    Attributes
    ----------
    feature_count_, feature_log_prob_ : ndarray (n_classes, n_features)
    class_count_, class_log_prior_, model_, classes_, n_features_in_, feature_names_in_
    """

    _kind = "multinomial"

    def __init__(self, *, alpha=1.0, feature_alpha=None, estimator="posterior-mean", class_prior="fitted",
                 prior_alpha=1.0):
        self.alpha = alpha
        self.feature_alpha = feature_alpha
        self.estimator = estimator
        self.class_prior = class_prior
        self.prior_alpha = prior_alpha

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        return tags


class ComplementNB(MultinomialNB):
    """Complement naive Bayes in the database (scikit-learn's ``ComplementNB``).

    Parameters are :class:`MultinomialNB`'s and ``norm`` (normalise the weights). As in
    scikit-learn, the class prior enters no score. ``feature_log_prob_`` holds the
    weights scikit-learn's does.
    """

    _kind = "complement"

    def __init__(self, *, alpha=1.0, feature_alpha=None, estimator="posterior-mean", norm=False,
                 class_prior="fitted", prior_alpha=1.0):
        super().__init__(alpha=alpha, feature_alpha=feature_alpha, estimator=estimator, class_prior=class_prior,
                         prior_alpha=prior_alpha)
        self.norm = norm

    @property
    def feature_all_(self) -> np.ndarray:
        return self.feature_count_.sum(axis=0)


class BernoulliNB(_Discrete):
    """Bernoulli naive Bayes in the database (scikit-learn's ``BernoulliNB``).

    Parameters
    ----------
    alpha, feature_alpha, estimator, class_prior, prior_alpha
        As for :class:`MultinomialNB`.
    beta : (float, float), optional
        Beta(β₁, β₀) prior of a present and an absent value (default (α, α)).
    binarize : float
        A value is present when it is greater than this threshold.

    Attributes
    ----------
    feature_count_ : ndarray (n_classes, n_features)
        Weighted rows per class where the feature is present.
    feature_log_prob_ : ndarray (n_classes, n_features)
        ln p(present | class).
    """

    _kind = "bernoulli"

    def __init__(self, *, alpha=1.0, feature_alpha=None, beta=None, estimator="posterior-mean", binarize=0.0,
                 class_prior="fitted", prior_alpha=1.0):
        self.alpha = alpha
        self.feature_alpha = feature_alpha
        self.beta = beta
        self.estimator = estimator
        self.binarize = binarize
        self.class_prior = class_prior
        self.prior_alpha = prior_alpha


class CategoricalNB(_NaiveBayes):
    """Categorical naive Bayes in the database (scikit-learn's ``CategoricalNB``).

    Every value of a column (a number or text) is a category; NULL and NaN are missing.

    Parameters
    ----------
    alpha, feature_alpha, estimator, class_prior, prior_alpha
        As for :class:`MultinomialNB`.
    unseen : {"missing", "bucket"}
        A value not seen in training contributes no term, or one smoothed extra slot.

    Attributes
    ----------
    categories_ : list of lists
        Each feature's categories seen in training, sorted.
    category_count_ : list of ndarray (n_classes, n_categories_j)
    feature_log_prob_ : list of ndarray (n_classes, n_categories_j)
    """

    _kind = "categorical"
    _numeric = False

    def __init__(self, *, alpha=1.0, feature_alpha=None, estimator="posterior-mean", unseen="missing",
                 class_prior="fitted", prior_alpha=1.0):
        self.alpha = alpha
        self.feature_alpha = feature_alpha
        self.estimator = estimator
        self.unseen = unseen
        self.class_prior = class_prior
        self.prior_alpha = prior_alpha

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True  # as scikit-learn's CategoricalNB
        return tags

    @property
    def categories_(self) -> list:
        return [list(self.model_.stats.features[f.name].values) for f in self.model_.features]

    @property
    def category_count_(self) -> list:
        return [self.model_.stats.features[f.name].counts[self._order] for f in self.model_.features]

    @property
    def feature_log_prob_(self) -> list:
        p = self.model_.log_parameters()
        return [p[f.name][1][self._order] for f in self.model_.features]


class MixedNB(_NaiveBayes):
    """Naive Bayes with a family per column (:func:`sqlnb.fit`'s default): Gaussian,
    categorical, Bernoulli, multinomial, complement or binned.

    Parameters
    ----------
    kind : str
        The family of every column without one in ``feature_kinds``; ``"auto"`` picks it
        from the column's type (numbers Gaussian, text and booleans categorical).
    feature_kinds : mapping column -> kind, optional
    bins : str or mapping, optional
        ``"mdl"`` or ``"quantile:K"``: discretise numeric columns (kind ``binned``).
    select_k : int, optional
        Keep the K discrete features of highest mutual information with the class.
    alpha, feature_alpha, beta, estimator, binarize, var_smoothing, tied_variance, norm, unseen,
    class_prior, prior_alpha
        As for the single-family estimators.
    """

    _numeric = False

    def __init__(self, *, kind="auto", feature_kinds=None, bins=None, select_k=None, alpha=1.0, feature_alpha=None,
                 beta=None, estimator="posterior-mean", binarize=0.0, var_smoothing=1e-9, tied_variance=False,
                 norm=False, unseen="missing", class_prior="fitted", prior_alpha=1.0):
        self.kind = kind
        self.feature_kinds = feature_kinds
        self.bins = bins
        self.select_k = select_k
        self.alpha = alpha
        self.feature_alpha = feature_alpha
        self.beta = beta
        self.estimator = estimator
        self.binarize = binarize
        self.var_smoothing = var_smoothing
        self.tied_variance = tied_variance
        self.norm = norm
        self.unseen = unseen
        self.class_prior = class_prior
        self.prior_alpha = prior_alpha


class WeightedNB(_NaiveBayes):
    """Naive Bayes with discriminatively learnt weights (WANBIA-C, one weight per feature
    value and class, :mod:`sqlnb.models.naive_bayes.weighted`): naive Bayes's
    log-probabilities, each times a weight fitted by minimising the conditional log loss
    with an L2 penalty ``l2`` towards 1 (``l2`` → ∞ is naive Bayes).

    Parameters
    ----------
    l2 : float, optional
        The penalty; None (default) chooses it by 5-fold cross-validation on the rows ``fit``
        is given (``model_.report["l2_cv"]`` holds the figures).
    kind, feature_kinds : optional
        As for :class:`MixedNB`; the features must be discrete (categorical or binned:
        numeric columns are binned, ``bins="mdl"`` by default; booleans are categories).
    bins : str or mapping
        ``"mdl"`` (default) or ``"quantile:K"``.
    alpha, feature_alpha, estimator, class_prior, prior_alpha
        As for :class:`CategoricalNB`: naive Bayes's log-probabilities the weights multiply.

    It has no ``partial_fit``: the weights are learnt on every row ``fit`` is given, and
    new rows that move a binned column's cut points could not keep them (the library's
    :func:`sqlnb.update` merges the counts of a stored model, keeps the weights with a
    note, and refuses such rows).
    """

    @available_if(lambda self: False)
    def partial_fit(self, X, y, classes=None, sample_weight=None):  # pragma: no cover - never available
        raise NotImplementedError

    _numeric = False  # categories of any type, as MixedNB

    def __init__(self, *, l2=None, kind="auto", feature_kinds=None, bins="mdl", alpha=1.0, feature_alpha=None,
                 estimator="posterior-mean", class_prior="fitted", prior_alpha=1.0):
        self.l2 = l2
        self.kind = kind
        self.feature_kinds = feature_kinds
        self.bins = bins
        self.alpha = alpha
        self.feature_alpha = feature_alpha
        self.estimator = estimator
        self.class_prior = class_prior
        self.prior_alpha = prior_alpha

    def _fit_model(self, con, name, label, features, weight):
        return api.fit(name, label, con=con, model="weighted", kind=self.kind, features=features, screen=False,
                       weight=weight, l2=self.l2, **self._fit_options(), **self._hyper())

    def _fit_packed(self, table, names, label, weight):
        return None  # the patterns are read by the weighted fit's own scan

    def _align(self, model, classes: list):
        return model  # the weighted fit refuses a class without rows (its log-prior is −inf)

    @classmethod
    def from_model(cls, model):
        estimator = super().from_model(model)
        estimator.l2 = model.l2  # the penalty the weights were learnt with
        return estimator

    @property
    def weights_(self) -> dict:
        """Feature name -> (classes, values) learnt weights, in ``classes_`` order."""
        return {name: w[self._order] for name, w in self.model_.weights.items()}


class TreeAugmentedNB(MixedNB):
    """Tree-augmented naive Bayes (``structure="tan"``): each discrete feature conditioned
    on the class and one parent feature, the tree (``tree_``) the maximum spanning tree of
    conditional mutual information. Parameters are :class:`MixedNB`'s, except that numeric
    columns are discretised by default (``bins="mdl"``, Fayyad & Irani) so that they take
    part in the tree (``bins=None``: they stay Gaussian, outside it). ``partial_fit`` is
    the exact update; new rows that move a binned column's cut points cannot be merged
    into pair counts over the old bins, and are refused with an error (refit)."""

    _structure = "tan"

    def __init__(self, *, kind="auto", feature_kinds=None, bins="mdl", select_k=None, alpha=1.0, feature_alpha=None,
                 beta=None, estimator="posterior-mean", binarize=0.0, var_smoothing=1e-9, tied_variance=False,
                 norm=False, unseen="missing", class_prior="fitted", prior_alpha=1.0):
        super().__init__(kind=kind, feature_kinds=feature_kinds, bins=bins, select_k=select_k, alpha=alpha,
                         feature_alpha=feature_alpha, beta=beta, estimator=estimator, binarize=binarize,
                         var_smoothing=var_smoothing, tied_variance=tied_variance, norm=norm, unseen=unseen,
                         class_prior=class_prior, prior_alpha=prior_alpha)

    def _fit_model(self, con, name, label, features, weight):
        if len(features) < 2:
            raise EstimatorInputError(f"TreeAugmentedNB needs at least 2 features to form a tree; X has "
                                      f"{len(features)} feature(s) (use MixedNB)")
        return super()._fit_model(con, name, label, features, weight)

    @property
    def tree_(self) -> dict:
        """Each tree feature's parent feature."""
        return self.model_.tree()

