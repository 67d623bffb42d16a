"""Naive Bayes with more structure than TAN: averaged one-dependence (AODE),
k-dependence (KDB) and averaged-structure estimators.

Both are :func:`sqlnb.fit` with ``structure="aode"`` or ``structure="kdb:K"`` (the
formulas are in :mod:`sqlnb.models.naive_bayes.aode` and
:mod:`sqlnb.models.naive_bayes.kdb`); the parameters are :class:`TreeAugmentedNB`'s
(numeric columns are discretised by default, ``bins="mdl"``, so that they take part in
the structure), plus the structure's own: AODE's ``min_count`` (a value is a super-parent
of a row when it was seen at least that many times in training) and KDB's ``k`` (parents
per feature, 1 to 5; from 3 on backed off to fewer parents with pseudo-count ``backoff``,
:mod:`sqlnb.models.naive_bayes.skdb`); :class:`SelectiveKDependenceNB` is ``structure="skdb:K"``,
k ≤ ``k_max`` and the features chosen by leave-one-out; :class:`EnsembleSelectiveKDependenceNB`
is ``structure="eskdb:K"``, the mean posterior of several of them over perturbed structures;
:class:`AveragedStructuresNB` averages the joints of several
(``structures="tan+kdb:2+aode"``, :mod:`sqlnb.models.naive_bayes.mixture`). ``partial_fit`` is the exact update, with TAN's limits (new rows
that move cut points are refused) and KDB's (new rows that change a feature's parents are
refused with the feature named).
"""

from __future__ import annotations

from sqlnb.estimators.data import EstimatorInputError
from sqlnb.estimators.naive_bayes import TreeAugmentedNB
from sqlnb.models.naive_bayes import aode, eskdb, kdb, mixture


class AveragedOneDependenceNB(TreeAugmentedNB):
    """Averaged one-dependence estimators (Webb, Boughton & Wang 2005): the average over
    the row's super-parent values ``x_i`` of ``p(c, x_i) Π_j p(x_j | c, x_i)``.

    Parameters
    ----------
    min_count : float
        A present value is a super-parent when it was seen at least this many times in
        training (``--aode-min-count``); with none left the row is scored by naive Bayes.
    kind, feature_kinds, bins, select_k, alpha, feature_alpha, beta, estimator, binarize,
    var_smoothing, tied_variance, norm, unseen, class_prior, prior_alpha
        As for :class:`TreeAugmentedNB`.
    """

    _structure = "aode"

    def __init__(self, *, min_count=aode.MIN_COUNT, kind="auto", feature_kinds=None, bins="mdl", select_k=None,
                 alpha=1.0, feature_alpha=None, beta=None, estimator="posterior-mean", binarize=0.0,
                 var_smoothing=1e-9, tied_variance=False, norm=False, unseen="missing", class_prior="fitted",
                 prior_alpha=1.0):
        super().__init__(kind=kind, feature_kinds=feature_kinds, bins=bins, select_k=select_k, alpha=alpha,
                         feature_alpha=feature_alpha, beta=beta, estimator=estimator, binarize=binarize,
                         var_smoothing=var_smoothing, tied_variance=tied_variance, norm=norm, unseen=unseen,
                         class_prior=class_prior, prior_alpha=prior_alpha)
        self.min_count = min_count

    def _hyper(self) -> dict:
        return {**super()._hyper(), "aode_min_count": self.min_count}

    @classmethod
    def from_model(cls, model):
        estimator = super().from_model(model)
        estimator.min_count = model.hyper.aode_min_count  # it decides which values average
        return estimator

    @property
    def tree_(self) -> dict:
        raise AttributeError("an AODE model has no tree: every feature is a super-parent in turn")


class KDependenceNB(TreeAugmentedNB):
    """k-dependence Bayes (Sahami 1996): features ordered by I(X; C), each conditioned on
    the class and up to ``k`` earlier features of highest I(X_i; X_j | C).

    Parameters
    ----------
    k : {1, 2, 3, 4, 5}
        Parents per feature (``structure="kdb:K"``).
    backoff : float
        k ≥ 3: the pseudo-count m of the back-off of a table on j parents towards the one
        on j − 1 (``--backoff``, :mod:`sqlnb.models.naive_bayes.skdb`); ``"loo"`` is
        :class:`SelectiveKDependenceNB`'s only (refused at fit: these rows are not kept).
    kind, feature_kinds, bins, select_k, alpha, feature_alpha, beta, estimator, binarize,
    var_smoothing, tied_variance, norm, unseen, class_prior, prior_alpha
        As for :class:`TreeAugmentedNB`.
    """

    def __init__(self, *, k=1, backoff=1.0, kind="auto", feature_kinds=None, bins="mdl", select_k=None, alpha=1.0,
                 feature_alpha=None, beta=None, estimator="posterior-mean", binarize=0.0, var_smoothing=1e-9,
                 tied_variance=False, norm=False, unseen="missing", class_prior="fitted", prior_alpha=1.0):
        super().__init__(kind=kind, feature_kinds=feature_kinds, bins=bins, select_k=select_k, alpha=alpha,
                         feature_alpha=feature_alpha, beta=beta, estimator=estimator, binarize=binarize,
                         var_smoothing=var_smoothing, tied_variance=tied_variance, norm=norm, unseen=unseen,
                         class_prior=class_prior, prior_alpha=prior_alpha)
        self.k = k
        self.backoff = backoff

    def _hyper(self) -> dict:
        return {**super()._hyper(), "backoff": self.backoff}

    @property
    def _structure(self) -> str:
        return f"kdb:{self.k}"

    def _fit_model(self, con, name, label, features, weight):
        if isinstance(self.k, bool) or self.k not in range(1, kdb.MAX_K + 1):
            raise EstimatorInputError(f"KDependenceNB's k is the number of parents per feature, 1 to "
                                      f"{kdb.MAX_K}, not {self.k!r}")
        return super()._fit_model(con, name, label, features, weight)

    @classmethod
    def from_model(cls, model):
        estimator = super().from_model(model)
        estimator.k = kdb.order_of(model.hyper.structure)
        estimator.backoff = model.hyper.backoff
        return estimator

    @property
    def tree_(self) -> dict:
        raise AttributeError("a KDB model has parent sets, not a tree: see parents_")

    @property
    def parents_(self) -> dict:
        """Each feature with parents -> the tuple of its parent features."""
        return {child: ps if isinstance(ps, tuple) else (ps,) for child, ps in self.model_.tree().items()}


class SelectiveKDependenceNB(KDependenceNB):
    """Selective k-dependence Bayes (SKDB, Martínez et al. 2016): KDB whose number of
    parents k ≤ ``k_max`` and number of features s (the first s by I(X; C)) are chosen by
    leave-one-out RMSE computed from the counts (``structure="skdb:K"``); the features
    past s add no term. ``choice_`` holds the chosen (k, s) and the leave-one-out table.

    Parameters
    ----------
    k_max : {1, 2, 3, 4, 5}
        The most parents per feature tried.
    backoff : float or "loo"
        The back-off pseudo-count m, or ``"loo"`` (the default): m per feature and depth
        chosen by leave-one-out (``choice_["backoff"]``).
    kind, feature_kinds, bins, select_k, alpha, feature_alpha, beta, estimator,
    binarize, var_smoothing, tied_variance, norm, unseen, class_prior, prior_alpha
        As for :class:`KDependenceNB`.
    """

    def __init__(self, *, k_max=kdb.MAX_K, backoff="loo", kind="auto", feature_kinds=None, bins="mdl", select_k=None,
                 alpha=1.0, feature_alpha=None, beta=None, estimator="posterior-mean", binarize=0.0,
                 var_smoothing=1e-9, tied_variance=False, norm=False, unseen="missing", class_prior="fitted",
                 prior_alpha=1.0):
        TreeAugmentedNB.__init__(self, kind=kind, feature_kinds=feature_kinds, bins=bins, select_k=select_k,
                                 alpha=alpha, feature_alpha=feature_alpha, beta=beta, estimator=estimator,
                                 binarize=binarize, var_smoothing=var_smoothing, tied_variance=tied_variance,
                                 norm=norm, unseen=unseen, class_prior=class_prior, prior_alpha=prior_alpha)
        self.k_max = k_max
        self.backoff = backoff

    @property
    def _structure(self) -> str:
        return f"skdb:{self.k_max}"

    def _fit_model(self, con, name, label, features, weight):
        if isinstance(self.k_max, bool) or self.k_max not in range(1, kdb.MAX_K + 1):
            raise EstimatorInputError(f"{type(self).__name__}'s k_max is the most parents per feature tried, 1 to "
                                      f"{kdb.MAX_K}, not {self.k_max!r}")
        return TreeAugmentedNB._fit_model(self, con, name, label, features, weight)

    @classmethod
    def from_model(cls, model):
        estimator = TreeAugmentedNB.from_model.__func__(cls, model)
        estimator.k_max = kdb.order_of(model.hyper.structure) or eskdb.order_of(model.hyper.structure)  # skdb, eskdb
        estimator.backoff = model.hyper.backoff
        return estimator

    @property
    def choice_(self) -> dict:
        """The chosen ``k`` and ``s`` and the leave-one-out ``rmse`` and ``zero_one``
        tables (k = 0 … k_max down, s = 1 … F across) over the features in ``order``;
        with ``backoff="loo"`` ``backoff``: each feature's m per depth 1, 2, …."""
        return self.model_.skdb_summary()


class EnsembleSelectiveKDependenceNB(SelectiveKDependenceNB):
    """An ensemble of selective KDBs (ESKDB, Zhang, Petitjean, Buntine et al. 2020):
    :data:`~sqlnb.models.naive_bayes.eskdb.MEMBERS` SKDBs over Gumbel-perturbed rankings
    and parent lists, each choosing its own k ≤ ``k_max``, s and m's by leave-one-out,
    their posteriors averaged (``structure="eskdb:K"``,
    :mod:`sqlnb.models.naive_bayes.eskdb`). ``members_`` holds each member's ranking,
    parents and choice.

    Parameters
    ----------
    k_max : {1, 2, 3, 4, 5}
        The most parents per feature a member tries.
    backoff : float or "loo"
        The back-off pseudo-count m, or ``"loo"`` (the default): m per member, feature
        and depth chosen by leave-one-out.
    kind, feature_kinds, bins, select_k, alpha, feature_alpha, beta, estimator,
    binarize, var_smoothing, tied_variance, norm, unseen, class_prior, prior_alpha
        As for :class:`SelectiveKDependenceNB`.
    """

    @property
    def _structure(self) -> str:
        return f"eskdb:{self.k_max}"

    @property
    def parents_(self) -> dict:
        raise AttributeError("an ensemble's members each have their own parents: see members_")

    @property
    def choice_(self) -> dict:
        raise AttributeError("an ensemble's members each make their own choice: see members_")

    @property
    def members_(self) -> list:
        """Per member (:meth:`sqlnb.models.naive_bayes.model.NaiveBayes.eskdb_summary`):
        its ranking ``order``, every feature's ranked ``parents``, the chosen ``k`` and ``s``,
        their leave-one-out ``rmse`` and ``zero_one`` loss, and with ``backoff="loo"`` each
        feature's m per depth (``backoff``)."""
        return self.model_.eskdb_summary()["members"]


class AveragedStructuresNB(TreeAugmentedNB):
    """The average of several structures' joint probabilities, all from the same counts:
    ``p(c, x) = (1/S) Σ_s p_s(c, x)`` over the members of ``structures``.

    Parameters
    ----------
    structures : str
        Members joined by ``+``, each once: ``naive``, ``tan``, ``kdb:1``, ``kdb:2``,
        ``aode`` (e.g. ``"tan+kdb:2+aode"``).
    min_count : float
        An ``aode`` member's super-parent frequency limit (as :class:`AveragedOneDependenceNB`).
    kind, feature_kinds, bins, select_k, alpha, feature_alpha, beta, estimator, binarize,
    var_smoothing, tied_variance, norm, unseen, class_prior, prior_alpha
        As for :class:`TreeAugmentedNB`.
    """

    def __init__(self, *, structures="tan+kdb:2+aode", min_count=aode.MIN_COUNT, kind="auto", feature_kinds=None,
                 bins="mdl", select_k=None, alpha=1.0, feature_alpha=None, beta=None, estimator="posterior-mean",
                 binarize=0.0, var_smoothing=1e-9, tied_variance=False, norm=False, unseen="missing",
                 class_prior="fitted", prior_alpha=1.0):
        super().__init__(kind=kind, feature_kinds=feature_kinds, bins=bins, select_k=select_k, alpha=alpha,
                         feature_alpha=feature_alpha, beta=beta, estimator=estimator, binarize=binarize,
                         var_smoothing=var_smoothing, tied_variance=tied_variance, norm=norm, unseen=unseen,
                         class_prior=class_prior, prior_alpha=prior_alpha)
        self.structures = structures
        self.min_count = min_count

    @property
    def _structure(self) -> str:  # checked by the library's Hyperparameters at fit
        return self.structures

    def _hyper(self) -> dict:
        return {**super()._hyper(), "aode_min_count": self.min_count}

    def _fit_model(self, con, name, label, features, weight):
        if not isinstance(self.structures, str) or mixture.members(self.structures) is None:
            raise EstimatorInputError(f"AveragedStructuresNB's structures are two or more of naive, tan, kdb:1, "
                                      f"kdb:2, aode joined by '+', not {self.structures!r}")
        return super()._fit_model(con, name, label, features, weight)

    @classmethod
    def from_model(cls, model):
        estimator = super().from_model(model)
        estimator.structures = model.hyper.structure
        estimator.min_count = model.hyper.aode_min_count
        return estimator

    @property
    def tree_(self) -> dict:
        raise AttributeError("an averaged model has one structure per member, not one tree")
