"""Hyperparameters of naive Bayes: how log-probabilities are derived from the statistics.

Smoothing (α, Beta(β₁, β₀)), the estimator, the class prior and its Dirichlet
concentration, the Gaussian variance floor, complement normalisation, the unseen-category
policy, the structure (naive, TAN or AODE, and AODE's frequency limit) and tied variances are applied when the model's
log-parameters are derived (:meth:`NaiveBayes.log_parameters
<sqlnb.models.naive_bayes.model.NaiveBayes.log_parameters>`), never at fit: changing them
(:meth:`~sqlnb.models.naive_bayes.model.NaiveBayes.with_params`), cross-validating them or
merging new rows needs no data. Checked and copied here, when constructed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import aode, eskdb, kdb, mixture, skdb, tan
from sqlnb.models.naive_bayes.families.base import log_ratio
from sqlnb.models.priors import class_alphas, given_prior

ESTIMATORS = ("posterior-mean", "map", "mle")
UNSEEN = ("missing", "bucket")


@dataclass(frozen=True)
class Hyperparameters:
    """How log-probabilities are derived from the statistics (never needs the data).

    Parameters
    ----------
    alpha : float
        Pseudo-count of the Dirichlet/Beta prior on discrete parameters (scikit-learn's
        ``alpha``, default 1: Laplace smoothing).
    feature_alpha : mapping of str to float
        Per-feature α (vector α for multinomial, bernoulli and complement columns); each
        key must name a discrete feature of the model (checked at fit).
    beta : (float, float), optional
        Beta(β₁, β₀) prior of Bernoulli features; default (α, α).
    estimator : {"posterior-mean", "map", "mle"}
        Posterior mean (the Bayesian posterior predictive; scikit-learn's rule), the
        posterior mode (pseudo-counts minus one), or plain frequencies.
    class_prior : "fitted", "uniform", "dirichlet", mapping of label to probability, or sequence
        A given prior (a mapping, or one probability per class in sorted class order) is
        validated at fit and kept as the model's own mapping class -> probability
        (:func:`sqlnb.models.priors.given_prior`).
    prior_alpha : float or mapping of label to float
        Dirichlet concentration of the class prior with ``class_prior="dirichlet"``: one α
        for every class, or α_c per class (a mapping label -> α_c; a class it leaves out
        takes 1; kept as the model's own mapping class -> α_c,
        :func:`sqlnb.models.priors.class_alphas`).
    var_smoothing : float
        Gaussian variance floor, as a fraction of the largest feature variance.
    norm : bool
        Complement naive Bayes weight normalisation.
    unseen : {"missing", "bucket"}
        Categorical values not seen in training: no term, or one smoothed extra slot.
    structure : {"naive", "tan", "aode", "kdb:1", …, "kdb:5", "skdb", "skdb:K"}
        Naive Bayes, or tree-augmented naive Bayes: discrete features conditioned on the
        class and one parent feature, the tree derived from pair counts the statistics
        must hold (:mod:`sqlnb.models.naive_bayes.tan`); averaged one-dependence
        estimators from the same counts (:mod:`sqlnb.models.naive_bayes.aode`); or the
        k-dependence classifier, each discrete feature conditioned on up to K earlier
        ones (:mod:`sqlnb.models.naive_bayes.kdb`; K = 3 to 5 with back-off smoothing),
        or the selective KDB whose K and number of features leave-one-out
        cross-validation chooses from the counts (:mod:`sqlnb.models.naive_bayes.skdb`).
    tied_variance : bool
        Gaussian features take one variance per feature shared by every class, the pooled
        within-class variance (plus the var_smoothing floor): the class log-odds are then
        linear in x (:mod:`sqlnb.models.naive_bayes.families.gaussian`).
    aode_min_count : float
        AODE's frequency limit m: a value is a super-parent only if at least m training
        rows (weighted) hold it (default :data:`sqlnb.models.naive_bayes.aode.MIN_COUNT`).
    backoff : float or "loo", optional
        The back-off pseudo-count m of ``kdb:3`` … ``kdb:5`` and ``skdb``: a table
        conditioned on j parents is smoothed towards the one on j − 1 with weight m
        (:mod:`sqlnb.models.naive_bayes.skdb`). ``"loo"`` (``skdb`` only, whose training
        rows are kept) chooses m per feature and depth by leave-one-out. None (the
        default) is :func:`default_backoff` of the structure: ``"loo"`` under ``skdb``,
        1 otherwise.
    """

    alpha: float = 1.0
    feature_alpha: Mapping[str, float] = field(default_factory=dict)
    beta: tuple[float, float] | None = None
    estimator: str = "posterior-mean"
    class_prior: Any = "fitted"
    prior_alpha: Any = 1.0
    var_smoothing: float = 1e-9
    norm: bool = False
    unseen: str = "missing"
    structure: str = "naive"
    tied_variance: bool = False
    aode_min_count: float = aode.MIN_COUNT
    backoff: float | str | None = None

    def __post_init__(self):
        if not isinstance(self.feature_alpha, Mapping):  # e.g. cv --grid feature_alpha=1
            raise SqlnbError(f"feature_alpha maps columns to their alpha ({{'col': 0.5}}, --feature-alpha COL=A), "
                             f"not {self.feature_alpha!r}")
        # Own copies: a caller mutating its mapping or array later changes nothing here.
        object.__setattr__(self, "feature_alpha", dict(self.feature_alpha))
        per_class = isinstance(self.prior_alpha, Mapping)
        if per_class:  # checked against the classes when bound to a model (NaiveBayes._bound)
            object.__setattr__(self, "prior_alpha", dict(self.prior_alpha))
        for flag in ("tied_variance", "norm"):
            if not isinstance(getattr(self, flag), (bool, np.bool_)):
                raise SqlnbError(f"{flag} must be True or False, not {getattr(self, flag)!r}")
            object.__setattr__(self, flag, bool(getattr(self, flag)))  # numpy's bool is no JSON
        prior = self.class_prior
        if isinstance(prior, Mapping):
            object.__setattr__(self, "class_prior", dict(prior))
        elif isinstance(prior, np.ndarray):
            object.__setattr__(self, "class_prior", prior.copy())
        elif isinstance(prior, (list, tuple)):
            object.__setattr__(self, "class_prior", tuple(prior))
        if self.estimator not in ESTIMATORS:
            raise SqlnbError(f"unknown estimator {self.estimator!r}; choose one of: {', '.join(ESTIMATORS)}")
        if (self.structure not in tan.STRUCTURES and kdb.order_of(self.structure) is None
                and not eskdb.ensemble(self.structure) and not mixture.members(self.structure)):
            raise SqlnbError(f"unknown structure {self.structure!r}; choose one of: {', '.join(tan.STRUCTURES)}, "
                             f"kdb:K (K = 1 to {kdb.MAX_K}), skdb or skdb:K, eskdb or eskdb:K (K = 1 to {kdb.MAX_K}), "
                             "or an average of them joined by '+' "
                             "(e.g. tan+kdb:2+aode)")
        if self.unseen not in UNSEEN:
            raise SqlnbError(f"unknown unseen-category policy {self.unseen!r}; choose one of: {', '.join(UNSEEN)}")
        alphas = [("alpha", self.alpha), *self.feature_alpha.items()]
        alphas += [] if per_class else [("prior_alpha", self.prior_alpha)]
        for name, a in alphas:
            if not (isinstance(a, (int, float)) and math.isfinite(a) and a >= 0):
                raise SqlnbError(f"alpha for {name!r} must be a finite number >= 0, not {a!r}")
        if self.beta is not None:
            pair = tuple(self.beta) if isinstance(self.beta, (list, tuple, np.ndarray)) else (self.beta,)
            if len(pair) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool)
                                         and math.isfinite(b) and b >= 0 for b in pair):
                raise SqlnbError(f"beta must be two finite numbers >= 0, (β1, β0): the pseudo-counts of a "
                                 f"present and of an absent Bernoulli value, not {self.beta!r}")
            object.__setattr__(self, "beta", (float(pair[0]), float(pair[1])))
        m = self.aode_min_count
        if not (isinstance(m, (int, float)) and not isinstance(m, bool) and math.isfinite(m) and m >= 0):
            raise SqlnbError(f"aode_min_count (--aode-min-count) must be a finite number >= 0, not {m!r}")
        object.__setattr__(self, "aode_min_count", float(m))
        object.__setattr__(self, "backoff", _backoff(self.backoff, self.structure))
        if not (isinstance(self.var_smoothing, (int, float)) and not isinstance(self.var_smoothing, bool)
                and math.isfinite(self.var_smoothing) and self.var_smoothing >= 0):
            raise SqlnbError(f"var_smoothing must be >= 0, not {self.var_smoothing!r}")
        if isinstance(self.class_prior, str) and self.class_prior not in ("fitted", "uniform", "dirichlet"):
            raise SqlnbError(
                f"unknown class prior {self.class_prior!r}; use fitted, uniform, dirichlet or LABEL=P,...")

    def changed(self, **changes) -> "Hyperparameters":
        """These hyperparameters with ``changes``; another structure with the back-off left
        at its structure's default takes the new structure's default."""
        if "structure" in changes and "backoff" not in changes and self.backoff == default_backoff(self.structure):
            changes["backoff"] = None
        return replace(self, **changes)

    def alpha_for(self, name: str) -> float:
        return float(self.feature_alpha.get(name, self.alpha))

    def beta_for(self, name: str) -> tuple[float, float]:
        b1, b0 = self.beta if self.beta is not None else (self.alpha_for(name),) * 2
        return self.pseudo(b1), self.pseudo(b0)

    def pseudo(self, a: float) -> float:
        """The estimator's effective pseudo-count: a (posterior mean), a − 1 (MAP), 0 (MLE)."""
        return {"posterior-mean": a, "map": a - 1.0, "mle": 0.0}[self.estimator]

    def class_pseudo(self, classes: list) -> np.ndarray:
        """The dirichlet class prior's effective pseudo-count per class, in class order:
        :meth:`pseudo` of each α_c (``prior_alpha``, one number or per class)."""
        return np.array([self.pseudo(a) for a in class_alphas(self.prior_alpha, classes)])

    def class_log_prior(self, n: np.ndarray, classes: list) -> np.ndarray:
        """ln π_c of classes of weights ``n`` under ``class_prior`` (the model's docstring)."""
        prior = self.class_prior
        with np.errstate(divide="ignore"):
            if isinstance(prior, str):
                if prior == "uniform":
                    return np.full(len(n), -math.log(len(n)))
                if prior == "dirichlet":
                    # (N_c + a_c) / (N + Σ a_c); MAP: a_c = α_c − 1, so the total is N + Σα − K
                    num = n + self.class_pseudo(classes)
                    return log_ratio(num, np.full(len(n), num.sum()), "the class prior")
                if n.sum() <= 0:
                    raise SqlnbError("the fitted class prior needs rows with positive weight")
                return np.log(n) - math.log(n.sum())
            return np.log(given_prior(prior, classes))

    def to_dict(self, classes: list) -> dict:
        d = asdict(self)
        d["feature_alpha"] = dict(self.feature_alpha)
        if d["structure"] == "naive":  # the default, and what models saved before it was one hold
            del d["structure"]
        if not d["tied_variance"]:  # likewise
            del d["tied_variance"]
        if d["aode_min_count"] == aode.MIN_COUNT:  # likewise
            del d["aode_min_count"]
        if d["backoff"] == 1.0:  # likewise
            del d["backoff"]
        if isinstance(self.prior_alpha, Mapping):  # JSON keys are text: α_c in class order
            d["prior_alpha"] = {"per_class": class_alphas(self.prior_alpha, classes).tolist()}
        if not isinstance(self.class_prior, str):
            d["class_prior"] = {"given": [float(p) for p in given_prior(self.class_prior, classes)]}
        return d

    @classmethod
    def from_dict(cls, d: dict, classes: list) -> "Hyperparameters":
        d = dict(d)
        if isinstance(d.get("class_prior"), dict):
            d["class_prior"] = dict(zip(classes, d["class_prior"]["given"]))
        if d.get("beta") is not None:
            d["beta"] = tuple(d["beta"])
        d.setdefault("backoff", 1.0)  # stored when not 1, and 1 before it could be chosen
        if isinstance(d.get("prior_alpha"), dict):
            d["prior_alpha"] = dict(zip(classes, d["prior_alpha"]["per_class"]))
        return cls(**d)


def default_backoff(structure: Any) -> float | str:
    """The back-off pseudo-count of ``structure`` when none is given: ``"loo"`` under
    ``skdb`` (m per feature and depth by leave-one-out: lower error than m = 1 on adult
    and spambase, docs/skdb.md), 1 under ``kdb:K``."""
    return "loo" if skdb.selective(structure) or eskdb.ensemble(structure) else 1.0


def _backoff(b: Any, structure: Any) -> float | str:
    """``backoff`` checked: a finite number >= 0, or ``"loo"`` under ``skdb`` (whose kept
    training rows the choice reads); None is :func:`default_backoff`."""
    if b is None:
        return default_backoff(structure)
    if isinstance(b, str) and b.strip().lower() == "loo":
        K = kdb.order_of(structure)
        if K is not None and not skdb.selective(structure):
            raise SqlnbError(f"backoff 'loo' chooses m by leave-one-out over the training rows, which structure "
                             f"{structure!r} does not keep; use structure 'skdb:{K}' (--structure skdb:{K}) or give "
                             "m as a number (--backoff 1)")
        return "loo"
    if not (isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) and b >= 0):
        raise SqlnbError(f"backoff (--backoff), the pseudo-count m of the back-off to fewer parents, must be a "
                         f"finite number >= 0 or 'loo' (chosen by leave-one-out, skdb), not {b!r}")
    return float(b)
