"""Shared test helpers: numpy arrays in, DuckDB scoring out."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest



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


# Hypothesis profiles (issue 33): "ci" by default (fixed seed, each property's own budget),
# "long" with HYPOTHESIS_PROFILE=long (random seeds, 10x the examples); see
# tests/support/hypothesis_profiles.py. Loaded here, before the test modules build settings.
from support import hypothesis_profiles  # noqa: E402

hypothesis_profiles.load()
