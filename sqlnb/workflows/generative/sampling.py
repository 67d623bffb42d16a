"""Sampling: synthetic rows drawn from the fitted joint distribution ``p(x, c)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sqlnb.errors import SqlnbError, suggest
from sqlnb.models.naive_bayes.families import REGISTRY, Feature
from sqlnb.models.naive_bayes.model import Hyperparameters, NaiveBayes
from sqlnb.stats import Statistics
from sqlnb.workflows.generative.common import _require_joint, _require_naive_bayes


# -- sampling -------------------------------------------------------------------------------
def _sampling_prior(model: NaiveBayes, classes: Any) -> np.ndarray:
    """Class probabilities to draw from: the model's prior, or it restricted to ``classes``
    (renormalised; uniform over them when the prior gives them no mass)."""
    prior = np.exp(model.class_log_prior())
    prior = prior / prior.sum()
    if classes is None:
        return prior
    wanted = list(classes) if isinstance(classes, (list, tuple, set, frozenset)) else [classes]
    names = [str(k) for k in model.classes]
    idx = []
    for c in wanted:
        if c in model.classes:
            idx.append(model.classes.index(c))
        elif str(c) in names:  # a label as typed on a command line: "1" for the class 1
            idx.append(names.index(str(c)))
        else:
            raise SqlnbError(f"class {c!r} is not one of the model's classes{suggest(str(c), names)}; "
                             f"its classes are: {', '.join(names)}")
    p = np.zeros(len(prior))
    p[idx] = prior[idx]
    if p.sum() <= 0:
        p[idx] = 1.0
    return p / p.sum()


def _presence_values(threshold: float) -> tuple[float, float]:
    """The (present, absent) values a sampled Bernoulli feature takes: 1.0 and 0.0, or
    ``t + 1`` and ``t`` when the threshold ``t`` is outside [0, 1)."""
    present = 1.0 if 1.0 > threshold else threshold + 1.0
    absent = 0.0 if 0.0 <= threshold else threshold
    return present, absent


def sample(model: NaiveBayes, n: int, *, classes: Any = None, seed: int | None = None):
    """Draw ``n`` synthetic rows from the fitted joint distribution ``p(x, c)``.

    Each row's class comes from the class prior (the one the model scores with) or, with
    ``classes``, from the prior restricted to them; then every feature is drawn given the
    class, independently, from its family with the parameters the model scores with:

    * gaussian: ``N(θ_c, var_c)`` with the floored variance ``var_c = M2/n + ε``.
    * bernoulli: present with probability ``θ_c`` (the smoothed estimate); the value is
      1.0 or 0.0 (BOOLEAN columns: true/false; thresholds outside [0, 1): ``t + 1``/``t``).
    * categorical: value ``v`` with probability ``exp(flp_j[c, v])``, renormalised over
      the training values (with ``unseen="bucket"`` the unseen slot is not drawn).
    * multinomial: a document length ``L ~ Poisson(λ_c)``, where ``λ_c`` is the class's
      mean total count per row (``Σ_j N_cj / N_c``; all classes pooled for a class
      without rows), then counts ``~ Multinomial(L, p_c)`` with the smoothed
      ``p_cj = exp(flp_cj)`` over all multinomial columns.
    * complement: the same as multinomial, with ``p_cj = (N_cj + α_j) / Σ_j' (N_cj' + α_j')``
      from the complement columns' counts (their weights are not probabilities).

    Missing values are not drawn (the model has no parameters for missingness), and
    numeric features are DOUBLE. ``sqlnb.fit(table, label, feature_kinds={...})`` with
    the model's kinds recovers the parameters as ``n`` grows.

    Parameters
    ----------
    model : NaiveBayes
    n : int
        Number of rows.
    classes : label or list of labels, optional
        Draw only these classes (in proportion to their prior). A label may also be given
        as its text (``"1"`` for the class ``1``), as on a command line.
    seed : int, optional
        Seed of ``numpy.random.default_rng``: the same seed gives the same rows.

    Returns
    -------
    pyarrow.Table
        The feature columns in the model's order, then the label column.
    """
    import pyarrow as pa

    model = _require_naive_bayes(model, "sampling")
    _require_joint(model, "sampling")
    bags = [f.name for f in model.features if f.bag is not None]
    if bags:
        raise SqlnbError(f"sampling token bags is not supported ({bags[0]!r} is one); "
                         "sample a model without text, LIST or MAP features")
    binned = [f.name for f in model.features if f.kind == "binned"]
    if binned:  # a bin is an interval, and the model holds no density within it (the outer two are unbounded)
        raise SqlnbError(f"sampling binned features is not supported ({binned[0]!r} is one); "
                         "sample a model fitted without --bins")
    if model.hyper.structure != "naive":
        raise SqlnbError(f"sampling draws each feature from its class alone; a {model.hyper.structure} model is not "
                         "supported: sample model.with_params(structure='naive'), the same counts without the tree")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise SqlnbError(f"the number of rows to sample must be an integer >= 0, not {n!r}")
    n = int(n)
    rng = np.random.default_rng(seed)
    K = len(model.classes)
    k = rng.choice(K, size=n, p=_sampling_prior(model, classes))
    params = model.log_parameters()
    stats = model.stats
    columns: dict[str, Any] = {}
    drawn_groups: set[str] = set()
    for f in model.features:
        if f.kind == "gaussian":
            mean, var = params[f.name]
            columns[f.name] = pa.array(mean[k] + np.sqrt(var[k]) * rng.standard_normal(n), pa.float64())
        elif f.kind == "bernoulli":
            flp, _ = params[f.name]
            present = rng.random(n) < np.exp(flp)[k]
            if f.sql_type.upper() == "BOOLEAN":
                columns[f.name] = pa.array(present, pa.bool_())
            else:
                hi, lo = _presence_values(f.threshold)
                columns[f.name] = pa.array(np.where(present, hi, lo), pa.float64())
        elif f.kind == "categorical":
            values, flp, _ = params[f.name]
            columns[f.name] = _draw_categorical(rng, k, values, flp)
        elif f.kind not in drawn_groups:  # multinomial / complement: all columns at once
            drawn_groups.add(f.kind)
            group = [g for g in model.features if g.kind == f.kind]
            counts = _draw_counts(rng, k, group, stats, model.hyper)
            for j, g in enumerate(group):
                columns[g.name] = pa.array(counts[:, j], pa.float64())
    ordered = {f.name: columns[f.name] for f in model.features}
    ordered[model.label] = pa.array(list(model.classes)).take(pa.array(k, pa.int64()))
    return pa.table(ordered)


def _draw_categorical(rng: np.random.Generator, k: np.ndarray, values: list, flp: np.ndarray):
    import pyarrow as pa

    if not values:  # a column that was NULL in every training row
        return pa.nulls(len(k))
    p = np.exp(flp)
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    u = rng.random(len(k))
    idx = np.empty(len(k), dtype=np.int64)
    for c in range(cdf.shape[0]):
        rows = k == c
        # Inverse CDF: the first value whose cumulative probability exceeds u.
        idx[rows] = np.minimum(np.searchsorted(cdf[c], u[rows], side="right"), len(values) - 1)
    return pa.array(values).take(pa.array(idx))


def _draw_counts(rng, k, group: list[Feature], stats: Statistics, hyper: Hyperparameters) -> np.ndarray:
    """Counts of one multinomial (or complement) group: L ~ Poisson(λ_c), then
    Multinomial(L, p_c) — see :func:`sample`."""
    flp = REGISTRY["multinomial"].estimate(group, stats.features, stats.class_n, hyper)
    p = np.exp(np.stack([flp[g.name] for g in group], axis=1))
    p = p / p.sum(axis=1, keepdims=True)
    totals = np.sum([stats.features[g.name].total for g in group], axis=0)
    n_c = stats.class_n
    pooled = totals.sum() / n_c.sum() if n_c.sum() > 0 else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(n_c > 0, totals / np.where(n_c > 0, n_c, 1.0), pooled)
    length = rng.poisson(lam[k])
    out = np.zeros((len(k), len(group)))
    for c in range(len(n_c)):
        rows = k == c
        if rows.any():
            out[rows] = rng.multinomial(length[rows], p[c])
    return out
