"""A per-class Dirichlet prior on the class probabilities (seed 000's
Dirichlet-multinomial): ``prior_alpha`` a mapping label -> α_c, ``--prior-alpha LABEL=A,...``.

    posterior mean   π_c = (N_c + α_c) / (N + Σ α)
    MAP              π_c = (N_c + α_c − 1) / (N + Σ α − K)
    MLE              π_c = N_c / N
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from support.cli import assert_error, invoke

# 2 rows of 1, 1 row of 2, 4 rows of 3: integer labels, matched by their text on the CLI
TABLE = pa.table({"x": [0.1, 0.5, 1.2, 2.0, 2.2, 2.9, 3.1], "y": [1, 1, 2, 3, 3, 3, 3]})


def test_posterior_mean_and_map_match_a_hand_computation():
    m = sqlnb.fit(TABLE, "y", class_prior="dirichlet", prior_alpha={1: 2.0, 3: 0.5})
    # class 2 is not named: α = 1. Σα = 3.5, N = 7
    assert m.hyper.prior_alpha == {1: 2.0, 2: 1.0, 3: 0.5}
    want = [math.log(4 / 10.5), math.log(2 / 10.5), math.log(4.5 / 10.5)]
    assert np.allclose(m.class_log_prior(), want, rtol=0, atol=1e-15)
    # MAP: (N_c + α_c − 1) / (N + Σα − K) with α = (3, 2, 1.5): (4, 2, 4.5) / 10.5
    got = m.with_params(estimator="map", prior_alpha={1: 3, 2: 2, 3: 1.5}).class_log_prior()
    assert np.allclose(got, [math.log(4 / 10.5), math.log(2 / 10.5), math.log(4.5 / 10.5)], rtol=0, atol=1e-15)
    assert np.allclose(m.with_params(estimator="mle").class_log_prior(), np.log([2 / 7, 1 / 7, 4 / 7]), atol=1e-15)
    # one number is every class's α, as before
    same = m.with_params(prior_alpha={1: 2.0, 2: 2.0, 3: 2.0}).class_log_prior()
    assert np.array_equal(same, m.with_params(prior_alpha=2.0).class_log_prior())
    # the score's prior term is this one: with a single constant feature the posterior is the prior
    flat = pa.table({"x": [1.0] * 7, "y": TABLE.column("y")})
    p = sqlnb.fit(flat, "y", class_prior="dirichlet", prior_alpha={1: 2.0, 3: 0.5}, var_smoothing=1e-3)
    proba = p.score(flat).to_arrow_table()
    assert np.allclose(proba.column("proba_1").to_numpy(), 4 / 10.5, rtol=1e-12)


def test_map_with_alpha_zero_puts_the_mode_on_the_boundary():
    # class 2 has one row: N_c + α_c − 1 = 0, its prior probability 0 (ln = −inf); (2, 0, 4) / 6
    m = sqlnb.fit(TABLE, "y", class_prior="dirichlet", prior_alpha={2: 0.0}, estimator="map")
    got = m.class_log_prior()
    assert got[1] == -np.inf and np.allclose(np.exp(got), [2 / 6, 0.0, 4 / 6], rtol=1e-15, atol=0)


def test_the_mapping_is_checked_and_copied():
    given = {1: 2.0}
    m = sqlnb.fit(TABLE, "y", class_prior="dirichlet", prior_alpha=given)
    given[1] = 50.0
    assert m.hyper.prior_alpha[1] == 2.0
    with pytest.raises(sqlnb.SqlnbError, match=r"prior_alpha \(--prior-alpha\) names 4, which is not a class"):
        sqlnb.fit(TABLE, "y", class_prior="dirichlet", prior_alpha={4: 1.0})
    for bad in (-1.0, float("nan"), "x", True):
        with pytest.raises(sqlnb.SqlnbError, match="prior_alpha .* of class 1 is"):
            sqlnb.fit(TABLE, "y", class_prior="dirichlet", prior_alpha={1: bad})
    with pytest.raises(sqlnb.SqlnbError, match="alpha for 'prior_alpha' must be a finite number"):
        sqlnb.fit(TABLE, "y", prior_alpha=-2.0)


def test_save_load_round_trip(tmp_path):
    db = str(tmp_path / "m.duckdb")
    m = sqlnb.fit(TABLE, "y", class_prior="dirichlet", prior_alpha={1: 2.0, 3: 0.5})
    m.save(db, "d")
    back = sqlnb.load(db, "d")
    assert back.hyper.prior_alpha == {1: 2.0, 2: 1.0, 3: 0.5}
    assert np.array_equal(back.class_log_prior(), m.class_log_prior())
    assert back.metadata()["hyperparameters"]["prior_alpha"] == {"per_class": [2.0, 1.0, 0.5]}


def test_cli_prior_alpha_per_class(tmp_path):
    pq.write_table(TABLE, tmp_path / "t.parquet")
    db = f"{tmp_path}/m.duckdb"
    result = invoke("fit", tmp_path / "t.parquet", "--label", "y", "--class-prior", "dirichlet",
                    "--prior-alpha", "1=2,3=0.5", "--model", f"{db}:d")
    assert result.exit_code == 0, result.stderr
    model = sqlnb.load(db, "d")
    assert model.hyper.prior_alpha == {1: 2.0, 2: 1.0, 3: 0.5}
    assert np.allclose(np.exp(model.class_log_prior()), [4 / 10.5, 2 / 10.5, 4.5 / 10.5], rtol=1e-14)
    shown = invoke("show", "--model", f"{db}:d", "--format", "json").stdout
    assert '"per_class"' in shown
    result = invoke("fit", tmp_path / "t.parquet", "--label", "y", "--class-prior", "dirichlet",
                    "--prior-alpha", "3", "--model", f"{db}:s")
    assert result.exit_code == 0, result.stderr
    assert sqlnb.load(db, "s").hyper.prior_alpha == 3.0
    assert_error(invoke("fit", tmp_path / "t.parquet", "--label", "y", "--class-prior", "dirichlet",
                        "--prior-alpha", "1=2,7=1", "--model", f"{db}:bad"),
                 "names '7', which is not a class", "the classes are 1, 2, 3")
    assert_error(invoke("fit", tmp_path / "t.parquet", "--label", "y", "--prior-alpha", "lots",
                        "--model", f"{db}:bad"), "--prior-alpha takes a number or LABEL=A")
    assert_error(invoke("fit", tmp_path / "t.parquet", "--label", "y", "--prior-alpha", "1=x",
                        "--model", f"{db}:bad"), "is not a number")
    assert "--prior-alpha yes=5,no=2" in invoke("fit", "--help").stdout


def test_cli_prior_alpha_alone_sets_the_dirichlet_prior(tmp_path):
    """--prior-alpha without --class-prior is the dirichlet prior it parameterises (it used
    to be ignored silently under the default fitted prior); with another --class-prior it
    is refused in one line."""
    pq.write_table(TABLE, tmp_path / "t.parquet")
    db = f"{tmp_path}/m.duckdb"
    result = invoke("fit", tmp_path / "t.parquet", "--label", "y", "--prior-alpha", "1=2,3=0.5", "--model", f"{db}:d")
    assert result.exit_code == 0, result.stderr
    model = sqlnb.load(db, "d")
    assert model.hyper.class_prior == "dirichlet"
    assert np.allclose(np.exp(model.class_log_prior()), [4 / 10.5, 2 / 10.5, 4.5 / 10.5], rtol=1e-14)
    assert_error(invoke("fit", tmp_path / "t.parquet", "--label", "y", "--class-prior", "uniform",
                        "--prior-alpha", "3", "--model", f"{db}:bad"),
                 "--prior-alpha is the concentration of the dirichlet class prior", "--class-prior uniform")
