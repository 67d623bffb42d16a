"""Newton's method for the convex objectives sqlnb fits in numpy: logistic regression
(:mod:`sqlnb.models.logistic`) and the weights of naive Bayes
(:mod:`sqlnb.models.naive_bayes.weighted`).

An objective gives ``size()``, ``value_grad(beta) -> (f, g, state)`` and
``hess_vec(state, v)``, and ``hessian(state)`` where the Newton system may be factorised
densely. Each step solves ``H Δ = −g`` (densely up to :data:`DENSE_LIMIT` parameters, else by
conjugate gradients on Hessian-vector products) and backtracks (Armijo) until the objective
decreases; the method stops when the step is below :data:`STEP_TOL` relative, or when twice
in a row the predicted decrease is below the rounding of ``f`` (see :func:`newton`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sqlnb.errors import SqlnbError

#: Largest number of parameters for which the Newton system is factorised densely.
DENSE_LIMIT = 2000
#: Relative step size at which Newton's method stops.
STEP_TOL = 1e-12
MAX_ITER = 200


def _cg(matvec, b: np.ndarray, tol: float, max_iter: int) -> np.ndarray:
    """Conjugate gradients for ``H x = b`` (H symmetric positive definite)."""
    x = np.zeros_like(b)
    r = b.copy()
    d = r.copy()
    rr = r @ r
    stop = tol * tol * rr
    for _ in range(max_iter):
        if rr <= stop:
            break
        Hd = matvec(d)
        alpha = rr / (d @ Hd)
        x += alpha * d
        r -= alpha * Hd
        rr_new = r @ r
        d = r + (rr_new / rr) * d
        rr = rr_new
    return x


def newton(obj: Any, beta0: np.ndarray,
           failure: str = "logistic regression did not converge in {steps} Newton steps; "
                          "try standardize=True or a smaller C", tol: float = STEP_TOL,
           reuse: float = 0.0) -> tuple[np.ndarray, int]:
    """Minimise ``obj`` from ``beta0``; returns the optimum and the iteration count.

    ``obj`` gives ``size()``, ``value_grad(beta) -> (f, g, state)`` and
    ``hess_vec(state, v)``, and ``hessian(state)`` if the Newton system may be factorised
    densely (up to :data:`DENSE_LIMIT` parameters; without it every step is solved by
    conjugate gradients). ``failure`` is the error raised after :data:`MAX_ITER` steps; ``tol``
    the relative step size at which it stops (a looser one serves a cross-validation that
    only ranks penalties).

    ``reuse`` > 0 is for objectives whose Hessian costs several evaluations of ``value_grad``
    (:mod:`sqlnb.models.naive_bayes.weighted`): a step is then solved with the last Hessian
    while the steps taken since it was made sum to at most ``reuse`` relative, each was taken
    whole and each shrank the gradient tenfold (the Hessian has moved by about that sum, so
    such a step still divides the gradient by about its inverse); the first step is solved
    with ``obj.rough_hessian(state)`` where the objective has one and it is not None (a
    cheaper approximation); and a step below ``tol`` is taken without evaluating the
    objective there. The optimum and the stopping rule are the
    same: only how many Hessians are made changes."""
    beta = beta0.copy()
    f, g, state = obj.value_grad(beta)
    dense = obj.size() <= DENSE_LIMIT and hasattr(obj, "hessian")
    quiet = 0  # consecutive steps whose predicted decrease is below f's rounding level
    H, drift = None, 0.0  # the last Hessian made, and the relative steps taken since (reuse)
    for it in range(1, MAX_ITER + 1):
        if dense:
            rough = obj.rough_hessian(state) if H is None and reuse and hasattr(obj, "rough_hessian") else None
            if rough is not None:  # the first step's, approximate: the next step makes the exact one
                H, drift = rough, math.inf
            elif H is None or not reuse or drift > reuse:
                H, drift = obj.hessian(state), 0.0
            try:
                step = -np.linalg.solve(H, g)
            except np.linalg.LinAlgError:  # pragma: no cover - H is positive definite
                step = -np.linalg.lstsq(H, g, rcond=None)[0]
        else:
            step = -_cg(lambda v: obj.hess_vec(state, v), g, 1e-12, 10 * obj.size())
        state = None  # not read again: an objective may reuse its memory for the next point
        slope = g @ step
        scale = max(1.0, np.max(np.abs(beta)))
        if reuse and np.max(np.abs(step)) <= tol * scale:
            return beta + step, it
        t = 1.0
        while True:
            f_new, g_new, state_new = obj.value_grad(beta + t * step)
            # Armijo, or no change beyond rounding (at the optimum f cannot decrease).
            if f_new <= f + 1e-4 * t * slope or abs(f_new - f) <= 1e-15 * max(1.0, abs(f)):
                break
            t *= 0.5
            if t < 1e-12:
                break
        beta = beta + t * step
        # Converged: the step is negligible, or twice in a row the Newton decrement −g·Δ
        # (twice the predicted decrease) is below the rounding of f. The second case is a
        # near-flat direction (e.g. one-hot columns summing to the intercept with a large
        # C): rounding noise in g, ~ε·C·n, then moves β there without changing any score.
        quiet = quiet + 1 if -slope <= 1e-14 * max(1.0, abs(f)) else 0
        if reuse:  # the Hessian stays while the steps are whole, small and the gradient falls fast
            moved = np.max(np.abs(t * step)) / scale
            shrank = np.max(np.abs(g_new)) <= 0.1 * np.max(np.abs(g))
            drift = drift + moved if t == 1.0 and shrank else math.inf
        f, g, state = f_new, g_new, state_new
        if np.max(np.abs(t * step)) <= tol * max(1.0, np.max(np.abs(beta))) or quiet >= 2:
            return beta, it
    raise SqlnbError(failure.format(steps=MAX_ITER))
