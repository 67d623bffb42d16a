"""The training log-likelihood log p(D|θ) and BIC of a naive Bayes model, from its
sufficient statistics alone (no data is read), under the model's current parameters.

Seed 003 writes the generative model's log-likelihood as a prior part plus one part per
class; with naive Bayes the second splits further into one sum per feature::

    log p(D|θ) = Σ_rows w ln p(x_row, y_row)
               = Σ_c N_c ln π_c + Σ_j Σ_c (family term summed over class c's rows)

where each family's sum is a function of the statistics it already keeps (``n``, ``mean``
and ``m2`` are weighted; a NULL value contributes no term, as at scoring)::

    gaussian      −n_cj/2 · ln(2π σ²_cj) − (M2_cj + n_cj (mean_cj − μ_cj)²) / (2 σ²_cj)
                  (μ, σ² the model's mean and variance: Σ (x − μ)² = M2 + n (mean − μ)²)
    categorical   Σ_v n(c, v) ln p(v|c)                  binned: the same over the bins
    bernoulli     n_on ln p_cj + n_off ln(1 − p_cj)      n_off = non-NULL rows − n_on
    multinomial   Σ_j count_cj ln p_cj                   without the multinomial
                                                         coefficient (a constant of the data)

which is exactly the per-row sum of the class scores at each row's own label: the
``jll_<label>`` a scoring query returns. A count of zero times ln 0 counts 0, as a row
without the value adds nothing. Complement features (no generative density), token bags
and tree-augmented models are not covered: :func:`log_likelihood` says so in one line.

BIC = −2 log p(D|θ) + k ln N, with N the (weighted) number of training rows and k the
free parameters, counted as:

* the class prior: K − 1 when estimated from the data (``fitted``, ``dirichlet``), 0 when
  given (``uniform``, a mapping of probabilities);
* a gaussian feature: 2K (a mean and a variance per class), K + 1 with ``tied_variance``;
* a categorical or binned feature over V values (V + 1 with ``unseen="bucket"``): K(V − 1);
* a bernoulli feature: K;
* the multinomial features, V columns forming one distribution per class: K(V − 1).
"""

from __future__ import annotations

import math

import numpy as np

from sqlnb.errors import SqlnbError


def _dot(counts: np.ndarray, logp: np.ndarray) -> float:
    """Σ counts · ln p, with 0 · ln 0 = 0 (a value never seen adds no term)."""
    counts = np.asarray(counts, dtype=float)
    logp = np.broadcast_to(np.asarray(logp, dtype=float), counts.shape)
    used = counts != 0
    return float(np.sum(counts[used] * logp[used]))


def unsupported(model) -> str | None:
    """Why :func:`log_likelihood` cannot be computed for ``model`` (``"n/a for <kind>"``),
    or None."""
    if getattr(model, "kind", None) != "naive_bayes":
        return f"n/a for {getattr(model, 'kind', type(model).__name__)}"
    if model.hyper.structure != "naive":
        return f"n/a for {model.hyper.structure} structure"
    if any(f.bag is not None for f in model.features):
        return "n/a for token bags"
    if any(f.kind == "complement" for f in model.features):
        return "n/a for complement features (no generative density)"
    return None


def log_likelihood(model) -> float:
    """log p(D|θ) of the training data under ``model``'s parameters (see the module
    docstring), weighted by the fit's weights when it had them.

    Raises
    ------
    SqlnbError
        For a model whose likelihood this does not cover (:func:`unsupported`).
    """
    why = unsupported(model)
    if why is not None:
        raise SqlnbError(f"the training log-likelihood is {why}; it covers naive Bayes over gaussian, "
                         "categorical, binned, bernoulli and multinomial columns")
    params = model.log_parameters()
    stats = model.stats
    total = _dot(stats.class_n, params["prior"])
    for f in model.features:
        s, p = stats.features[f.name], params[f.name]
        if f.kind == "gaussian":
            mu, var = (np.asarray(a, dtype=float) for a in p)
            seen = s.n > 0
            n, m2, mean, mu, var = s.n[seen], s.m2[seen], s.mean[seen], mu[seen], var[seen]
            total += float(np.sum(-0.5 * n * np.log(2.0 * math.pi * var) - (m2 + n * (mean - mu) ** 2) / (2.0 * var)))
        elif f.kind in ("categorical", "binned"):
            total += _dot(s.counts, p[1])
        elif f.kind == "bernoulli":
            on = np.asarray(s.total, dtype=float)
            total += _dot(on, p[0]) + _dot(np.asarray(s.n, dtype=float) - on, p[1])
        else:  # multinomial
            total += _dot(s.total, p)
    return total


def free_parameters(model) -> int:
    """The number of free parameters k of BIC, counted as the module docstring says."""
    K = len(model.classes)
    prior = model.hyper.class_prior
    k = K - 1 if isinstance(prior, str) and prior in ("fitted", "dirichlet") else 0
    multinomial = 0
    for f in model.features:
        s = model.stats.features[f.name]
        if f.kind == "gaussian":
            k += K + 1 if model.hyper.tied_variance else 2 * K
        elif f.kind in ("categorical", "binned"):
            V = len(s.values) + (1 if f.kind == "categorical" and model.hyper.unseen == "bucket" else 0)
            k += K * (V - 1)
        elif f.kind == "bernoulli":
            k += K
        elif f.kind == "multinomial":
            multinomial += 1
    return k + (K * (multinomial - 1) if multinomial else 0)


def bic(model) -> float:
    """−2 log p(D|θ) + k ln N (N the weighted number of training rows)."""
    n = float(np.sum(model.stats.class_n))
    return -2.0 * log_likelihood(model) + free_parameters(model) * math.log(n)


def summary(model) -> dict:
    """What ``sqlnb show`` reports: ``{"log_likelihood", "bic", "parameters", "rows"}``, or
    ``{"note": "n/a for <kind>"}`` for a model it does not cover."""
    why = unsupported(model)
    if why is not None:
        return {"note": why}
    return {"log_likelihood": log_likelihood(model), "bic": bic(model), "parameters": free_parameters(model),
            "rows": float(np.sum(model.stats.class_n))}


def summary_text(d: dict) -> str:
    """:func:`summary` as the line of ``sqlnb show``."""
    if "note" in d:
        return d["note"]
    rows = f"{d['rows']:,.0f}" if float(d["rows"]).is_integer() else f"{d['rows']:,.6g}"
    return (f"log p(D|θ) = {d['log_likelihood']:,.2f}, BIC = {d['bic']:,.2f} "
            f"({d['parameters']} free parameters, N = {rows})")
