"""What the scikit-learn estimators say to their users: the variance floor's note names
what an estimator's user can do (not ``--features``), for a DataFrame and an array alike,
and comes once per text per process (not once per fold of a search); ``sample_weight``
given to an estimator whose fit takes none is one clear line saying what to use."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.validation import has_fit_parameter

import sqlnb.estimators.naive_bayes as nb
from sqlnb.errors import SqlnbError, VarianceFloorWarning
from sqlnb.estimators import GaussianNB, LinearDiscriminantAnalysis, LogisticRegression, QuadraticDiscriminantAnalysis


def _rows(n: int = 300):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"id": np.arange(n) * 1e4, "a": rng.normal(size=n) * 1e-3, "b": rng.normal(size=n)})
    return X, (X.b > 0).astype(int).to_numpy()


def test_the_variance_floor_note_names_what_an_estimator_user_can_do(monkeypatch):
    monkeypatch.setattr(nb, "_FLOOR_NOTES", set(), raising=False)
    X, y = _rows()
    with pytest.warns(VarianceFloorWarning) as got:
        GaussianNB().fit(X, y)
    (w,) = got
    assert str(w.message) == (
        "GaussianNB: column 'id' sets the Gaussian variance floor (var_smoothing × its variance) above the variance "
        "of 2 other columns ('a', 'b'), whose class densities it flattens; drop that column from X (an ID read as a "
        "number does this), rescale it, or give a smaller var_smoothing (now 1e-09)")
    assert w.filename == __file__  # said where the user called fit
    # An array (fitted from its packed rows) gets it too, its columns by position.
    with pytest.warns(VarianceFloorWarning, match=r"column X\[:, 0\] sets the Gaussian variance floor .* other "
                                                  r"columns \(X\[:, 1\], X\[:, 2\]\)"):
        GaussianNB().fit(X.to_numpy(), y)


def test_the_variance_floor_note_comes_once_through_a_grid_search():
    script = textwrap.dedent("""
        import numpy as np, pandas as pd
        from sklearn.model_selection import GridSearchCV
        from sqlnb.estimators import GaussianNB
        rng = np.random.default_rng(0)
        n = 300
        X = pd.DataFrame({"id": np.arange(n) * 1e4, "a": rng.normal(size=n) * 1e-3, "b": rng.normal(size=n)})
        y = (X.b > 0).astype(int)
        GridSearchCV(GaussianNB(), {"var_smoothing": [1e-9, 1e-8]}, cv=5).fit(X, y)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "VarianceFloorWarning" in line]
    # One per distinct text (two var_smoothing values), not one per fold (5 x 2 + the refit).
    assert len(notes) == 2, done.stderr
    assert "(now 1e-09)" in notes[0] and "(now 1e-08)" in notes[1]
    assert "--features" not in done.stderr and "features=" not in done.stderr


@pytest.mark.parametrize("cls", [LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis, LogisticRegression])
def test_sample_weight_where_fit_takes_none_is_one_clear_line(cls):
    X, y = _rows(100)
    X = X[["a", "b"]]
    with pytest.raises(TypeError) as e:  # what Python raises for an argument a function does not take
        cls().fit(X, y, sample_weight=np.ones(len(y)))
    assert isinstance(e.value, SqlnbError) and type(e.value).__name__ == "EstimatorArgumentError"
    line = str(e.value)
    assert line.startswith(f"{cls.__name__}.fit() takes no sample_weight: it is fitted on unweighted rows; repeat "
                           "each row by its whole-number weight (np.repeat(X, w, axis=0), np.repeat(y, w)), or use a "
                           "naive Bayes estimator, whose fit takes sample_weight (")
    weighted = line.split("takes sample_weight (")[1]
    assert "\n" not in line and "GaussianNB" in weighted and "MultinomialNB" in weighted
    assert "Discriminant" not in weighted and "Logistic" not in weighted
    # The signature still has none, so that meta-estimators pass none.
    assert not has_fit_parameter(cls(), "sample_weight")
    with pytest.raises(TypeError, match=r"fit\(\) got an unexpected keyword argument 'weights'"):
        cls().fit(X, y, weights=np.ones(len(y)))
    cls().fit(X, y)
