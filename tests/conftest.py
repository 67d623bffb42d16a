"""Shared test helpers: numpy arrays in, DuckDB scoring out."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

# In CI (support.ci.in_ci) every skip is a failure: the two hooks turn skipped test and
# collection reports into failed ones.
from support.ci import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401


#: Slow by what they start: a JVM (10-30 s, then seconds a query) or a PostgreSQL server.
SLOW_MARKERS = ("spark", "postgres")
#: Slow as whole files that tests/conftest.py marks because their owners' helpers keep them
#: (the doc sessions run the documented CLI end to end: cli.md's demo and adult sessions took
#: ~100 s each in the durations of a full run).
SLOW_FILES = ("test_docs.py", "test_docs_postgres.py")


def _is_property_test(item) -> bool:
    """A hypothesis test: its example budget is set for CI (50-200 examples)."""
    from hypothesis import is_hypothesis_test
    return is_hypothesis_test(getattr(item, "obj", None))


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    """``slow`` (left out by ``pytest -m "not slow"``, the inner loop) also marks every
    ``spark`` and ``postgres`` test, every hypothesis property test and the SLOW_FILES;
    other slow tests carry the mark in their own file."""
    for item in items:
        if item.get_closest_marker("slow") is not None:
            continue
        if (any(item.get_closest_marker(m) is not None for m in SLOW_MARKERS)
                or item.path.name in SLOW_FILES or _is_property_test(item)):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Name the running test to tests/support/engines.py, which fails a test that starts
    PostgreSQL or Spark without the marker (a module fixture's server: its first test)."""
    from support import engines
    engines.CURRENT_TEST = item


def frame(X, y=None, w=None, prefix="x") -> pa.Table:
    """An Arrow table with columns x0..x{d-1} (and y, w) from numpy arrays."""
    X = np.asarray(X)
    cols = {f"{prefix}{j}": X[:, j] for j in range(X.shape[1])}
    if y is not None:
        cols["y"] = np.asarray(y)
    if w is not None:
        cols["w"] = np.asarray(w, dtype=float)
    return pa.table(cols)


def scores(model, X, con=None, outputs=("proba", "prediction", "jll", "log_evidence")):
    """Score ``X`` (numpy) with ``model`` in DuckDB: dict of numpy arrays, row order kept."""
    con = con or duckdb.connect()
    t = frame(X)
    t = t.append_column("__row", pa.array(np.arange(len(X))))
    con.register("score_input", t)
    rel = model.score("score_input", con, outputs=outputs)
    rel = con.sql(f'SELECT * FROM ({rel.sql_query()}) ORDER BY "__row"')
    d = rel.to_arrow_table().to_pydict()
    out = {"proba": np.array([d[c] for c in model.proba_columns()], dtype=float).T}
    if "prediction" in outputs:
        out["prediction"] = d["prediction"]
    if "jll" in outputs:
        from sqlnb.models.finish import class_columns
        out["jll"] = np.array([d[c] for c in class_columns("jll_", model.classes)], dtype=float).T
    if "log_evidence" in outputs:
        out["log_evidence"] = np.array(d["log_evidence"], dtype=float)
    return out


@pytest.fixture
def con():
    c = duckdb.connect()
    yield c
    c.close()


@pytest.fixture
def second_passes(monkeypatch):
    """Names of the columns each exact second pass of a Gaussian fit recomputed
    (``sqlnb.models.naive_bayes.fit._exact_m2_pass``, spied on)."""
    import importlib

    fit_module = importlib.import_module("sqlnb.models.naive_bayes.fit")
    calls: list[list[str]] = []
    original = fit_module._exact_m2_pass

    def spy(engine, source, label, label_type, weight, gauss, *rest, **kw):
        calls.append([f.name for f in gauss])
        return original(engine, source, label, label_type, weight, gauss, *rest, **kw)

    monkeypatch.setattr(fit_module, "_exact_m2_pass", spy)
    return calls


@pytest.fixture(scope="session")
def spambase():
    """``(con, train, test)``: table ``spambase`` (ESL split, ``row_id``) in ``con`` and its
    numpy train/test views (tests/support/shared_data.py); skips without the shared data."""
    from support import shared_data as sd
    sd.require_shared_data("spambase")
    c = duckdb.connect()
    c.execute("CREATE TABLE spambase AS " + sd.render(sd.query("spambase", row_id=True)))
    data = sd.numpy_dataset("spambase", con=c)
    yield c, data.train(), data.test()
    c.close()


# Hypothesis profiles: "ci" by default (fixed seed, each property's own budget),
# "long" with HYPOTHESIS_PROFILE=long (random seeds, 10x the examples); see
# tests/support/hypothesis_profiles.py. Loaded here, before the test modules build settings.
from support import hypothesis_profiles  # noqa: E402

hypothesis_profiles.load()
