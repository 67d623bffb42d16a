"""Class priors: validated, in class order, and as stored in a model's metadata.

Naive Bayes (``class_prior``) and LDA/QDA (``priors``) take the same spellings: the
fitted class frequencies, ``"uniform"``, a mapping label -> probability, or (LDA/QDA) a
sequence in sorted class order. A given prior must name every class and sum to 1.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from sqlnb.errors import SqlnbError


def given_prior(prior: Mapping[Any, float], classes: list) -> np.ndarray:
    """Validate a given class prior and return it in class order."""
    lookup = {str(k): v for k, v in prior.items()}
    missing = [c for c in classes if c not in prior and str(c) not in lookup]
    extra = [k for k in prior if k not in classes and str(k) not in {str(c) for c in classes}]
    if missing or extra:
        raise SqlnbError(
            f"the given class prior must name every class exactly: missing {missing}, unknown {extra}")
    p = np.array([float(prior[c]) if c in prior else float(lookup[str(c)]) for c in classes])
    if np.any(p < 0) or not math.isclose(p.sum(), 1.0, abs_tol=1e-9):
        raise SqlnbError(f"the given class prior must be >= 0 and sum to 1 (it sums to {p.sum()!r})")
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
        raise SqlnbError(f"unknown priors {priors!r}; use fitted, uniform or LABEL=P,...")
    if isinstance(priors, Mapping):
        return given_prior(priors, classes)
    p = np.asarray(list(priors), dtype=float)
    if p.shape != (len(classes),):
        raise SqlnbError(f"give one prior per class ({len(classes)}: {classes!r}), not {len(p)}")
    return given_prior(dict(zip(classes, p)), classes)


def priors_to_json(priors: Any, classes: list) -> Any:
    """``priors`` as stored in model metadata (a given prior as a list in class order)."""
    if priors is None or isinstance(priors, str):
        return priors
    return {"given": [float(p) for p in resolve_priors(priors, classes, np.ones(len(classes)))]}


def priors_from_json(stored: Any, classes: list) -> Any:
    if isinstance(stored, dict):
        return dict(zip(classes, stored["given"]))
    return stored
