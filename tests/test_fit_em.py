"""``sqlnb fit-em`` / :func:`sqlnb.fit_em`: semi-supervised EM on labelled and unlabelled rows.

* Binned columns: the cut points are those of ``sqlnb.fit`` on the labelled rows (the
  unlabelled rows are re-weighted, never cut on), ``fit-em --bins`` is ``fit --bins``'s
  option, and MAP EM with bins never decreases its objective. (``--kind binned`` used to
  fail with "binned column 'x' has no cut points yet" and ``sqlnb.fit_em(bins=...)`` to
  raise a TypeError.) Updating such a model is refused in one line.
* Without unlabelled rows, fit-em says so in one sentence that agrees with itself.

The EM models themselves (update = refit, sampling, novelty) are in tests/test_generative.py.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from support.cli import assert_error, invoke

# -- 1. fit-em with binned columns ---------------------------------------------------------


@pytest.fixture(scope="module")
def em_file(tmp_path_factory) -> str:
    """200 rows: a numeric x that tells the classes apart, a text column, 60 labelled
    rows and 140 with a NULL label (the unlabelled rows)."""
    rng = np.random.default_rng(0)
    n = 200
    y = np.arange(n) % 2
    x = np.round(rng.normal(2.0 * y, 1.0), 4)
    label = pa.array([("a", "b")[v] if i < 60 else None for i, v in enumerate(y)], pa.string())
    t = pa.table({"x": x, "c": pa.array(rng.choice(["p", "q"], n)), "y": label})
    path = tmp_path_factory.mktemp("em") / "em.parquet"
    pq.write_table(t, path)
    return str(path)


def _labelled(path: str) -> str:
    return f"SELECT * FROM read_parquet('{path}') WHERE y IS NOT NULL"


def _proba(model, data) -> np.ndarray:
    out = model.predict_proba(data).fetchnumpy()
    return np.column_stack([out[c] for c in model.proba_columns()])


@pytest.mark.parametrize("args", [{"bins": "mdl"}, {"bins": "quantile:4"},
                                  {"kind": "binned", "features": ["x"]}])
def test_fit_em_cuts_binned_columns_at_the_labelled_rows_as_fit_does(em_file, args):
    """max_iter=0 is the labelled fit: the same cut points and bit-identical probabilities
    as sqlnb.fit with the same bins on the labelled rows."""
    con = duckdb.connect()
    em0 = sqlnb.fit_em(em_file, label="y", con=con, max_iter=0, **args)
    fit = sqlnb.fit(_labelled(em_file), "y", con=con, **args)
    (x,) = [f for f in em0.features if f.name == "x"]
    assert x.kind == "binned" and x.edges and x.edges == [f for f in fit.features if f.name == "x"][0].edges
    np.testing.assert_array_equal(_proba(em0, em_file), _proba(fit, em_file))


def test_fit_em_re_weights_the_unlabelled_rows_bins(em_file):
    con = duckdb.connect()
    em = sqlnb.fit_em(em_file, label="y", con=con, bins="mdl", max_iter=5, tol=0.0)
    assert em.report["em"]["iterations"] == 5
    x = em.stats.features["x"]
    # every row in the bins once in all: 60 labelled + 140 unlabelled split by their posteriors
    assert x.counts.sum() == pytest.approx(200.0, abs=1e-9)
    em0 = sqlnb.fit_em(em_file, label="y", con=con, bins="mdl", max_iter=0)
    assert em0.stats.features["x"].counts.sum() == pytest.approx(60.0, abs=1e-9)


def test_map_em_with_bins_never_decreases_its_objective(em_file):
    """The binned columns' pseudo-counts are in the MAP objective (a categorical over the
    bins): without them it dipped by 1e-5 here while the log-likelihood dipped by 9e-6."""
    em = sqlnb.fit_em(em_file, label="y", con=duckdb.connect(), bins="quantile:6", max_iter=15, tol=0.0)
    ll, obj = (np.array(em.report["em"][k]) for k in ("log_likelihood", "objective"))
    assert np.diff(ll).min() < 0  # the smoothing makes the likelihood alone dip
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:]))


def test_fit_em_command_takes_fits_bins_option(em_file, tmp_path):
    from sqlnb.cli.generative import fit_em_command
    from sqlnb.cli.train import fit

    def bins(command):
        (p,) = [p for p in command.params if p.name == "bins"]
        return p.opts, p.help, p.metavar, p.multiple

    assert bins(fit_em_command) == bins(fit)
    assert "--bins" in invoke("fit-em", "--help").stdout
    db = f"{tmp_path}/m.duckdb"
    done = invoke("fit-em", em_file, "--label", "y", "--bins", "mdl", "--model", f"{db}:em", "--max-iter", 3)
    assert done.exit_code == 0, done.stderr
    done = invoke("fit-em", em_file, "--label", "y", "--kind", "binned", "--features", "x", "--model", f"{db}:k")
    assert done.exit_code == 0, done.stderr
    con = duckdb.connect()
    expected = sqlnb.fit_em(em_file, label="y", con=con, bins="mdl", max_iter=3)
    np.testing.assert_array_equal(_proba(sqlnb.load(db, "em"), em_file), _proba(expected, em_file))


def test_updating_an_em_model_with_bins_is_refused_in_one_line(em_file, tmp_path):
    db = f"{tmp_path}/m.duckdb"
    assert invoke("fit-em", em_file, "-y", "y", "--bins", "mdl", "--model", f"{db}:em").exit_code == 0
    assert_error(invoke("update", em_file, "--model", f"{db}:em"),
                 "binned column 'x'", "labelled rows by EM", "refit with sqlnb fit-em")


# -- 2. the fingerprint hashes what scores, not where the rows came from ------------------------


# -- 3. a relation's connection ----------------------------------------------------------------


# -- 3. fit-em without unlabelled rows ----------------------------------------------------
def test_fit_em_without_unlabelled_rows_says_so_in_agreement(tmp_path):
    data = tmp_path / "labelled.csv"
    data.write_text("x,y\n1.0,a\n2.0,b\n3.0,a\n2.5,b\n")
    result = invoke("fit-em", data, "--label", "y", "--model", f"{tmp_path / 'm.duckdb'}:m")
    assert result.exit_code != 0
    assert result.output == (f"Error: {str(data)!r} has no rows with a NULL label to learn from as unlabelled rows; "
                             "give unlabelled rows (--unlabelled DATA2, unlabelled= in Python)\n")
    empty = pa.table({"x": pa.array([], pa.float64())})
    with pytest.raises(SqlnbError, match=r"^the in-memory table has no rows; give unlabelled rows"):
        sqlnb.fit_em(str(data), empty, label="y")
