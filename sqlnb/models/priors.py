"""Class priors: validated, in class order, and as stored in a model's metadata.

Naive Bayes (``class_prior``) and LDA/QDA (``priors``) take the same spellings: the
fitted class frequencies, ``"uniform"``, a mapping label -> probability, or a sequence
(list, tuple, 1-D array) in sorted class order. A given prior is checked when the model
is fitted — one probability per class, each finite and >= 0, summing to 1 within
scikit-learn's tolerance (``np.isclose``: 1e-5 relative, 1e-8 absolute; inside it the
prior is used as given, as ``GaussianNB`` does) — and the model keeps its own copy, a
mapping class -> probability, never the caller's object.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from sqlnb.errors import SqlnbError, suggest

#: A given prior may sum to 1 ± (SUM_ATOL + SUM_RTOL): scikit-learn's ``np.isclose`` test.
SUM_RTOL, SUM_ATOL = 1e-5, 1e-8


def _listed(classes: list, limit: int = 10) -> str:
    shown = ", ".join(repr(c) for c in classes[:limit])
    return shown + (f", ... ({len(classes)} classes)" if len(classes) > limit else "")


_NONE = object()  # "no such class" (None may be a key)


def _from_mapping(prior: Mapping[Any, Any], classes: list, what: str = "the class prior",
                  default: Any = _NONE) -> list:
    """The mapping's values in class order; a key may be the class or its text (the CLI's
    ``LABEL=P``). A class the mapping leaves out takes ``default``; without one, every
    class must be named."""
    by_text = {str(c): c for c in classes}
    found: dict[Any, Any] = {}
    for key, p in prior.items():
        c = key if key in classes else by_text.get(str(key), _NONE)
        if c is _NONE:
            raise SqlnbError(f"{what} names {key!r}, which is not a class of the training data"
                             f"{suggest(str(key), by_text)}; the classes are {_listed(classes)}")
        if c in found:
            raise SqlnbError(f"{what} names class {c!r} twice; give each class once")
        found[c] = p
    missing = [c for c in classes if c not in found]
    if missing and default is _NONE:
        raise SqlnbError(f"{what} must name every class: it gives no probability for {missing[0]!r} "
                         f"(the classes are {_listed(classes)})")
    return [found.get(c, default) for c in classes]


def class_alphas(alpha: Any, classes: list) -> np.ndarray:
    """The Dirichlet concentration α_c of each class prior, in class order, from one number
    (every class) or a mapping label -> α_c (a key may be the label's text, as the CLI's
    ``--prior-alpha LABEL=A,...`` gives it). A class the mapping leaves out takes α = 1,
    the default concentration (a uniform Dirichlet's, Laplace's rule).

    Raises
    ------
    SqlnbError
        A label that is no class (named, with the classes), a class named twice, or an α
        that is not a finite number >= 0.
    """
    if isinstance(alpha, Mapping):
        values = _from_mapping(alpha, classes, "prior_alpha (--prior-alpha)", default=1.0)
    else:
        values = [alpha] * len(classes)
    out = np.empty(len(classes))
    for k, (c, a) in enumerate(zip(classes, values)):
        ok = isinstance(a, (int, float, np.number)) and not isinstance(a, bool) and math.isfinite(a) and a >= 0
        if not ok:
            raise SqlnbError(f"prior_alpha (--prior-alpha) of class {c!r} is {a!r}; a Dirichlet concentration "
                             "must be a finite number >= 0")
        out[k] = float(a)
    return out



def given_prior(prior: Any, classes: list) -> np.ndarray:
    """Validate a given class prior and return it in class order, as a new float array.

    Parameters
    ----------
    prior : mapping label -> probability, or a sequence in class order
    classes : list
        The model's classes, sorted.

    Raises
    ------
    SqlnbError
        One line naming the class or value at fault: a label that is no class, a class
        without a probability, the wrong number of probabilities, a negative, NaN or
        non-numeric probability, or a sum away from 1.
    """
    if isinstance(prior, Mapping):
        values = _from_mapping(prior, classes)
    elif isinstance(prior, (str, bytes)) or not hasattr(prior, "__iter__"):
        raise SqlnbError(f"a class prior is 'fitted', 'uniform', a mapping label -> probability or one "
                         f"probability per class in class order, not {prior!r}")
    else:
        if isinstance(prior, np.ndarray) and prior.ndim != 1:
            raise SqlnbError(f"a class prior array must be 1-D (one probability per class), not of shape {prior.shape}")
        values = list(prior)
        if len(values) != len(classes):
            raise SqlnbError(f"the class prior gives {len(values)} probabilities for {len(classes)} classes "
                             f"({_listed(classes)}); give one per class, in class order, or a mapping label -> p")
    p = np.empty(len(classes))
    for k, (c, v) in enumerate(zip(classes, values)):
        try:
            p[k] = float(v)
        except (TypeError, ValueError):
            raise SqlnbError(f"the class prior of class {c!r} is {v!r}, not a number") from None
        if isinstance(v, bool) or not math.isfinite(p[k]) or p[k] < 0:
            raise SqlnbError(f"the class prior of class {c!r} is {v if isinstance(v, bool) else float(p[k])!r}; "
                             "a probability must be a finite number >= 0")
    total = float(p.sum())
    if abs(total - 1.0) > SUM_ATOL + SUM_RTOL:
        raise SqlnbError(f"the class prior sums to {total:.10g}, not 1; give probabilities that sum to 1")
    return p


def resolve_priors(priors: Any, classes: list, counts: np.ndarray) -> np.ndarray:
    """Class priors in class order from ``None``/``"fitted"`` (the class frequencies),
    ``"uniform"``, a mapping label -> probability, or a sequence in sorted class order."""
    if priors is None or (isinstance(priors, str) and priors == "fitted"):
        total = float(np.sum(counts))
        return np.asarray(counts, dtype=float) / total
    if isinstance(priors, str):
        if priors == "uniform":
            return np.full(len(classes), 1.0 / len(classes))
        raise SqlnbError(f"unknown priors {priors!r}{suggest(priors, ('fitted', 'uniform'))}; "
                         "use fitted, uniform or LABEL=P,...")
    return given_prior(priors, classes)


def own_prior(priors: Any, classes: list) -> Any:
    """The prior as the model keeps it: a name as given, a given prior as a new mapping
    class -> probability (validated; never the caller's array or mapping)."""
    if priors is None or isinstance(priors, str):
        return priors
    return dict(zip(classes, given_prior(priors, classes).tolist()))


def priors_to_json(priors: Any, classes: list) -> Any:
    """``priors`` as stored in model metadata (a given prior as a list in class order)."""
    if priors is None or isinstance(priors, str):
        return priors
    return {"given": [float(p) for p in given_prior(priors, classes)]}


def priors_from_json(stored: Any, classes: list) -> Any:
    if isinstance(stored, dict):
        return dict(zip(classes, stored["given"]))
    return stored
