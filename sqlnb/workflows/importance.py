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
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: What the score of each family measures (the header of ``sqlnb show``'s top features).
MEASURES = {
    "categorical": "mutual information with the class, nats (a perfect separator scores H(class), the most)",
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
    params = model.log_parameters()
    log_prior = np.asarray(params["prior"], dtype=float)
    ranked: dict[str, list[dict]] = {}
    for f in model.features:
        if getattr(f, "bag", None) is not None:
            continue  # token bags: see sqlnb.models.naive_bayes.text.top_terms (sqlnb show --top-terms)
        p = params[f.name]
        if f.kind == "categorical":
            values, flp, unseen = p
            log_p = flp if unseen is None else np.column_stack([flp, unseen])
            entry = _discrete_entry(model, log_prior, np.asarray(log_p, dtype=float), list(values))
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
