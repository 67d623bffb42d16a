"""How much each naive Bayes feature tells about the class: the ranking of ``sqlnb show``.

The families' terms are not on one scale, so features are ranked within their family, each
by a measure computed from the model's derived parameters (its statistics under the
hyperparameters in force: estimator, α, class prior, ...), never from the data again:

* categorical, bernoulli: the **mutual information** between the feature and the class
  under the model, in nats::

      I(X; Y) = Σ_c π_c Σ_v p(v | c) · ln( p(v | c) / p(v) ),   p(v) = Σ_c π_c p(v | c)

  over the feature's training values ``v`` (with ``unseen=bucket``, the unseen slot too;
  for a Bernoulli feature the two outcomes present and absent), ``π`` the class prior in
  force and ``0 · ln 0 = 0``. It is finite even where the MLE estimator gives a value
  probability 0 in a class (``ln 0 = −inf``), and it is bounded by the entropy of the
  class ``H(Y) = −Σ_c π_c ln π_c``, which it reaches exactly when the feature separates
  the classes perfectly: such a feature ranks first. (A spread of log-probabilities
  across classes cannot do that: the lecture notes' spam example under MLE has
  ``p(good | spam) = 0`` and ``p(bad | ham) = 0``, and a spread that skips the −inf
  entries ranked "good" and "bad", the two words that decide the class, last.)
  Each value's share ``p(v) · KL(p(c | v) ‖ π) ≥ 0`` of the sum names the value that
  tells most, with the class it favours (the largest ``p(v | c)``).
* multinomial / complement: the spread of the per-count weight across classes,
  ``max_c w_c − min_c w_c``. A weight of −inf (a count never seen in a class, under MLE
  or MAP) makes the spread infinite: one count of the feature rules a class out, so it
  ranks first; its score is reported as ``None`` with the classes it rules out.
* gaussian: the spread of the class means in within-class standard deviations,
  ``(max_c μ_c − min_c μ_c) / sqrt(Σ_c π_c σ²_c)`` (variances are floored above zero, so
  it is always finite).

Token bags are left out: their terms are ranked by
:func:`sqlnb.models.naive_bayes.text.top_terms` (``sqlnb show --top-terms``).

Per class (:func:`top_features_per_class`, the HTML report), a naive Bayes feature is
scored by how far its distribution in the class is from its distribution over all
classes, ``D_c = KL(p(x | c) ‖ p(x))`` in nats, whose prior-weighted mean over the
classes is the mutual information above (``I = Σ_c π_c D_c``): exact sums for categorical
and Bernoulli features, quadrature of
``E[ln p(x | c) − ln Σ_k π_k p(x | k)]`` under ``N(μ_c, σ²_c)`` for Gaussian ones
(the trapezoid rule on a fine grid, :data:`GRID_POINTS`).
Multinomial and complement features are scored by what one count says for the class,
``w_c − Σ_k π_k w_k`` (``w`` the per-count log-probability or complement weight), listed
after the others since the units differ. For LDA the score is the class's coefficient
less the prior-weighted mean coefficient, times the column's pooled standard deviation;
for QDA the class mean's distance from the overall mean in the class's standard
deviations; for logistic regression the class's coefficient less the mean over the
classes (in standardised units with ``standardize``, otherwise per unit of the column).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sqlnb.models.finish import label_text
from sqlnb.models.naive_bayes.families.binned import bin_label

#: What the score of each family measures (the header of ``sqlnb show``'s top features).
MEASURES = {
    "categorical": "mutual information with the class, nats (a perfect separator scores H(class), the most)",
    "binned": "mutual information with the class, nats (a perfect separator scores H(class), the most)",
    "bernoulli": "mutual information with the class, nats (a perfect separator scores H(class), the most)",
    "multinomial": "spread of ln p(feature | class) per count across classes, nats (inf: rules a class out)",
    "complement": "spread of the complement weight per count across classes",
    "gaussian": "spread of class means in within-class standard deviations",
}


def class_entropy(log_prior: np.ndarray) -> float:
    """``H(Y) = −Σ_c π_c ln π_c`` in nats: the most mutual information a feature can have."""
    p = np.exp(log_prior)
    return float(-np.sum(np.where(p > 0, p * np.where(p > 0, log_prior, 0.0), 0.0)))


def value_information(log_prior: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """Each outcome's share of ``I(X; Y)`` (module docstring); their sum is ``I(X; Y)``.

    ``log_p`` is ``ln p(v | c)``, (classes, outcomes); −inf entries and classes of prior
    zero contribute nothing (``0 · ln 0 = 0``)."""
    log_joint = log_prior[:, None] + log_p                      # ln π_c p(v | c)
    finite = np.isfinite(log_joint)
    top = np.max(np.where(finite, log_joint, -np.inf), axis=0)
    safe_top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(under="ignore"):
        # ln p(v) by a max-shifted log-sum-exp over the classes (an outcome no class can
        # produce has p(v) = 0 and contributes nothing).
        log_marginal = safe_top + np.log(np.sum(np.where(finite, np.exp(log_joint - safe_top), 0.0), axis=0))
        joint = np.where(finite, np.exp(np.where(finite, log_joint, 0.0)), 0.0)
    ratio = np.where(finite, log_p - log_marginal, 0.0)          # ln p(v | c) / p(v)
    return np.sum(joint * ratio, axis=0)


def _value_names(f, values) -> list:
    """A discrete feature's values as shown: a binned feature's bin numbers as intervals."""
    if f.kind == "binned":
        return [bin_label(f.edges, v) for v in values]
    return list(values)


def _discrete_entry(model, log_prior: np.ndarray, log_p: np.ndarray, values: list | None) -> dict[str, Any]:
    shares = value_information(log_prior, log_p)
    entry: dict[str, Any] = {"score": float(max(shares.sum(), 0.0))}  # ≥ 0; rounding may give −1e-17
    if values:
        j = int(np.argmax(shares[:len(values)]))
        entry["strongest_value"] = values[j]
        entry["favours"] = model.classes[int(np.argmax(log_p[:, j]))]
    return entry


def _weight_entry(model, w: np.ndarray) -> dict[str, Any]:
    ruled_out = [c for c, x in zip(model.classes, w) if x == -math.inf]
    if ruled_out:
        return {"score": None, "rules_out": ruled_out}
    return {"score": float(np.max(w) - np.min(w))}


def rank_key(entry: dict) -> float:
    """Sort key: higher first; an infinite spread (score None) before any number."""
    return -math.inf if entry["score"] is None else -entry["score"]


def top_features(model, n: int = 5) -> dict[str, list[dict]]:
    """Per family, the ``n`` naive Bayes features that tell most about the class (see the
    module docstring), best first; empty for other model kinds."""
    if not hasattr(model, "log_parameters"):
        return {}
    model = model.naive_bayes() if hasattr(model, "naive_bayes") else model  # a weighted model: its counts'
    params = model.log_parameters()
    log_prior = np.asarray(params["prior"], dtype=float)
    ranked: dict[str, list[dict]] = {}
    for f in model.features:
        if getattr(f, "bag", None) is not None:
            continue  # token bags: see sqlnb.models.naive_bayes.text.top_terms (sqlnb show --top-terms)
        p = params[f.name]
        if f.kind in ("categorical", "binned"):  # binned: the values are bin numbers, shown as intervals
            values, flp, unseen = p
            log_p = flp if unseen is None else np.column_stack([flp, unseen])
            entry = _discrete_entry(model, log_prior, np.asarray(log_p, dtype=float), _value_names(f, values))
        elif f.kind == "bernoulli":
            flp, neg = p
            entry = _discrete_entry(model, log_prior, np.column_stack([flp, neg]), None)
        elif f.kind == "gaussian":
            mean, var = p
            prior = np.exp(log_prior)
            within = float(np.dot(prior, var)) if np.all(np.isfinite(prior)) else float(np.mean(var))
            entry = {"score": float((mean.max() - mean.min()) / math.sqrt(within)) if within > 0 else 0.0}
        else:  # multinomial, complement: one weight per class
            entry = _weight_entry(model, np.asarray(p, dtype=float))
        ranked.setdefault(f.kind, []).append({"name": f.name, **entry})
    return {k: sorted(v, key=rank_key)[:n] for k, v in ranked.items()}


#: Grid of the quadrature of a Gaussian feature's per-class divergence: the trapezoid rule
#: over ±GRID_SDS standard deviations of the class in GRID_POINTS points. For a smooth
#: integrand decaying like a Gaussian it converges geometrically: within 1e-11 of scipy's
#: adaptive ``quad`` on three classes of widths 1, 0.5, 2 and on a class 1/50 as wide as
#: the other (tests/test_report_plots.py); 64 Gauss–Hermite nodes were off by 2e-3 where
#: a narrow class sits inside a wide one.
GRID_SDS, GRID_POINTS = 12.0, 4001


def _gaussian_divergence(mean: np.ndarray, var: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    """``KL(N(μ_c, σ²_c) ‖ Σ_k π_k N(μ_k, σ²_k))`` per class, by quadrature on a grid."""
    u = np.linspace(-GRID_SDS, GRID_SDS, GRID_POINTS)
    weight = np.exp(-0.5 * u ** 2) / math.sqrt(2 * math.pi) * (u[1] - u[0])  # N(0, 1) density × du
    weight[[0, -1]] *= 0.5
    sd = np.sqrt(var)
    x = mean[:, None] + sd[:, None] * u[None, :]                               # (classes, points)
    own = -0.5 * u[None, :] ** 2 - np.log(sd)[:, None]                        # ln N(x; μ_c, σ_c) + ½ ln 2π
    comps = (log_prior[:, None, None] - 0.5 * ((x[None] - mean[:, None, None]) / sd[:, None, None]) ** 2
             - np.log(sd)[:, None, None])                                    # ln π_k N(x; μ_k, σ_k) + ½ ln 2π
    finite = np.isfinite(log_prior)
    comps = comps[finite]
    top = np.max(comps, axis=0)
    with np.errstate(under="ignore"):
        mix = top + np.log(np.sum(np.exp(comps - top), axis=0))
    return np.maximum((own - mix) @ weight, 0.0)


def _per_class_naive_bayes(model, n: int) -> dict[Any, list[dict]]:
    params = model.log_parameters()
    log_prior = np.asarray(params["prior"], dtype=float)
    prior = np.exp(log_prior)
    K = len(model.classes)
    rows: list[list[dict]] = [[] for _ in range(K)]
    counts: list[list[dict]] = [[] for _ in range(K)]
    for f in model.features:
        if getattr(f, "bag", None) is not None:
            continue
        p = params[f.name]
        if f.kind in ("categorical", "binned", "bernoulli"):
            if f.kind != "bernoulli":
                values, flp, unseen = p
                log_p = np.asarray(flp if unseen is None else np.column_stack([flp, unseen]), dtype=float)
                names = [*_value_names(f, values), *([] if unseen is None else ["(unseen)"])]
            else:
                log_p, names = np.column_stack(p), ["present", "absent"]
            joint = log_prior[:, None] + log_p
            finite = np.isfinite(joint)
            top = np.max(np.where(finite, joint, -np.inf), axis=0)
            top = np.where(np.isfinite(top), top, 0.0)
            log_marginal = top + np.log(np.sum(np.where(finite, np.exp(np.where(finite, joint, 0.0) - top), 0.0), 0))
            ok = np.isfinite(log_p)
            terms = np.where(ok, np.exp(np.where(ok, log_p, 0.0)) * (np.where(ok, log_p, 0.0) - log_marginal), 0.0)
            for k in range(K):
                # A column NULL in every training row has no value (and no term in any class).
                detail = label_text(names[int(np.argmax(terms[k]))]) if terms.shape[1] else "no value in training"
                rows[k].append({"name": f.name, "kind": f.kind, "score": float(max(terms[k].sum(), 0.0)),
                                "detail": detail})
        elif f.kind == "gaussian":
            mean, var = (np.asarray(a, dtype=float) for a in p)
            kl = _gaussian_divergence(mean, var, log_prior)
            overall = float(np.dot(prior, mean))
            for k in range(K):
                rows[k].append({"name": f.name, "kind": f.kind, "score": float(kl[k]),
                                "detail": "higher" if mean[k] > overall else "lower"})
        else:
            w = np.asarray(p, dtype=float)
            ok = np.isfinite(w)
            mean_w = float(np.dot(prior[ok], w[ok])) if ok.any() else 0.0
            for k in range(K):
                if ok[k]:
                    counts[k].append({"name": f.name, "kind": f.kind, "score": float(w[k] - mean_w),
                                      "detail": "per count"})
    out = {}
    for k, c in enumerate(model.classes):
        best = sorted(rows[k], key=rank_key)[:n] + sorted(counts[k], key=rank_key)[:n]
        out[c] = [e for e in best if e["score"] > 0]
    return out


def _per_class_dense(model, n: int) -> dict[Any, list[dict]]:
    names = list(model.feature_names)
    if model.kind == "logistic":
        coef = np.asarray(model.coef_, dtype=float)
        if len(model.classes) == 2:  # scikit-learn's one row is class 1 against class 0
            coef = np.vstack([-coef[0] / 2, coef[0] / 2])
        score = coef - coef.mean(axis=0)
        unit = "per standard deviation" if model.standardize else "per unit"
    elif model.kind == "lda":
        coef = np.asarray(model.coef_, dtype=float)
        score = (coef - model.priors_ @ coef) * np.sqrt(np.diag(model.covariance_))
        unit = "per pooled standard deviation"
    else:  # qda
        means = np.asarray(model.means_, dtype=float)
        sd = np.sqrt(np.diagonal(model.class_covariances(), axis1=1, axis2=2))
        score = (means - model.priors_ @ means) / sd
        unit = "class standard deviations from the mean"
    out = {}
    for k, c in enumerate(model.classes):
        entries = [{"name": name, "kind": "numeric", "score": float(abs(v)),
                    "detail": f"{'higher' if v > 0 else 'lower'} ({v:+.3g} {unit})"}
                   for name, v in zip(names, score[k])]
        out[c] = [e for e in sorted(entries, key=rank_key)[:n] if e["score"] > 0]
    return out


def top_features_per_class(model, n: int = 5) -> dict[Any, list[dict]]:
    """Per class, the features that most set it apart (module docstring): ``{class:
    [{"name", "kind", "score", "detail"}, ...]}``, best first. ``detail`` names the value
    most typical of the class (categorical, Bernoulli), or whether the class's values are
    higher or lower than the rest (numeric)."""
    if hasattr(model, "log_parameters"):
        return _per_class_naive_bayes(model.naive_bayes() if hasattr(model, "naive_bayes") else model, n)
    if model.kind in ("lda", "qda", "logistic"):
        return _per_class_dense(model, n)
    return {}
