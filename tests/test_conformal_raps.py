"""RAPS (regularised adaptive prediction sets): sets equal to MAPIE 1.6's non-randomised
RAPS row for row at MAPIE's own λ, k_reg and calibration rows; λ and k_reg chosen as
documented (checked by an implementation of the procedure in numpy); the command, the
stored sets and the format-3 fixture; the exported sets on SQLite, PostgreSQL and Spark.
RAPS against APS on digits is tests/test_conformal_digits.py."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import SqlnbError, UpdateWarning
from sqlnb.workflows.conformal import conformal
from support.cli import assert_error, invoke
from test_conformal_engines import (postgres_gives_duckdbs_sets_and_stores_them, spark_gives_duckdbs_sets_and_stores_one,
                                     sqlite_gives_duckdbs_sets, table)
from test_conformal import fixture_scores_as_stored
from test_conformal_oracles import CLASSES, Lookup, NoDraw, data, probabilities

ALPHA = 0.1
LAMBDAS = (0.001, 0.01, 0.1, 0.2, 0.5)  # the paper's grid


@pytest.fixture(scope="module")
def setup():
    con = duckdb.connect()
    model = sqlnb.fit(data(600, 1), "y", features=["x1", "x2"])
    cal, test = data(700, 2), data(800, 3)
    return con, model, cal, test, probabilities(model, cal, con), probabilities(model, test, con)


def sets_of(model, t: pa.Table, con) -> np.ndarray:
    got = model.score(t, con, outputs=("prediction",), keep=["id"]).to_arrow_table().to_pydict()
    sets = np.array([[c in s for c in model.classes] for s in got["prediction_set"]])
    assert list(got["set_size"]) == list(sets.sum(axis=1))
    return sets


@pytest.mark.parametrize("alpha", [0.1, 0.3])
def test_raps_sets_equal_mapie(setup, alpha):
    """MAPIE chooses λ and k_reg on its own split of the calibration rows and fits the
    threshold on the rest: given those rows, λ and k_reg, sqlnb's threshold and sets are
    MAPIE's (its calibration scores without randomisation: NoDraw). At α = 0.3 MAPIE's
    k_reg = 2 penalises two of the four classes and the sets differ from APS's."""
    from mapie.classification import SplitConformalClassifier
    con, model, cal, test, Pc, Pt = setup
    P = np.vstack([Pc, Pt])
    n = cal.num_rows
    X = np.arange(len(P))[:, None]
    oracle = SplitConformalClassifier(estimator=Lookup(P, CLASSES).fit(), confidence_level=1 - alpha,
                                      conformity_score="raps", prefit=True, random_state=NoDraw(0))
    oracle.conformalize(X[:n], np.array(cal["y"].to_pylist()))
    _, want = oracle.predict_set(X[n:])
    score = oracle._mapie_classifier.conformity_score_function_
    lam, k_reg, q = float(score.lambda_star), int(score.k_star[0]), float(score.quantiles_[0])
    tuning = set(int(i) for i in score.X_raps[:, 0])
    rest = cal.filter(pa.array([i not in tuning for i in range(n)]))
    fitted = conformal(model, rest, alpha, "raps", lam=lam, k_reg=k_reg, con=con)
    assert fitted.conformal.lam == lam and fitted.conformal.k_reg == k_reg
    assert fitted.conformal.counts == (n - len(tuning),)
    assert fitted.conformal.thresholds[0] == pytest.approx(q, abs=1e-12)
    # MAPIE keeps a class within 1e-8 of the threshold; no row is that close here
    order = -np.sort(-Pt, axis=1)
    before = np.cumsum(order, axis=1) - order + lam * np.maximum(0, np.arange(4) - k_reg)
    assert np.abs(before - q).min() > 1e-8
    got = sets_of(fitted, test, con)
    assert (got == want[:, :, 0]).all()
    assert len(set(got.sum(axis=1))) >= 3
    if alpha == 0.3:  # the penalty changes sets: RAPS is not APS here
        assert k_reg == 2
        aps = sets_of(conformal(model, rest, alpha, "aps", con=con), test, con)
        assert (aps != got).any() and got.sum() < aps.sum()


def _hash(P: np.ndarray, seed: int) -> np.ndarray:
    """The documented u = frac(43758.5453·sin(x)), x = 12.9898·seed + 0.5 + Σ_c 78.233·(c + 1)·p_c."""
    x = np.full(len(P), 12.9898 * seed + 0.5)
    for c in range(P.shape[1]):
        x = x + 78.233 * (c + 1) * P[:, c]
    v = np.sin(x) * 43758.5453
    return v - np.floor(v)


def _order_statistic(scores: np.ndarray, alpha: float) -> float:
    n = len(scores)
    k = math.ceil((n + 1) * (1 - alpha))
    return math.inf if k > n else float(np.sort(scores)[k - 1])


def _raps_by_hand(P: np.ndarray, y: np.ndarray, alpha: float, seed: int) -> tuple[float, int, float, int]:
    """The documented choice, written from the docs: (λ, k_reg, threshold, rows behind it)."""
    u = _hash(P, seed)
    tune = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        keys = [P[rows, j] for j in reversed(range(P.shape[1]))] + [u[rows]]
        tune[rows[np.lexsort(keys)][:int(math.floor(len(rows) * 0.2 + 0.5))]] = True
    p_y = P[np.arange(len(y)), y]
    rank = 1 + (P > p_y[:, None]).sum(axis=1)
    mass = (P * (P > p_y[:, None])).sum(axis=1)
    k_reg = int(_order_statistic(rank[tune], alpha))

    def scores(lam):
        return mass + p_y + lam * np.maximum(0, rank - k_reg)
    best = None
    for lam in LAMBDAS:
        q = _order_statistic(scores(lam)[tune], alpha)
        T = P[tune]
        above = (T[:, None, :] > T[:, :, None])  # [row, c, j]: p_j > p_c
        m_c = (above * T[:, None, :]).sum(axis=2) + lam * np.maximum(0, above.sum(axis=2) - k_reg)
        size = int((m_c < q).sum())
        if best is None or size < best[1]:
            best = (lam, size)
    lam = best[0]
    return lam, k_reg, _order_statistic(scores(lam)[~tune], alpha), int((~tune).sum())


@pytest.mark.parametrize("alpha,seed", [(0.1, 0), (0.05, 3)])
def test_lambda_and_k_reg_are_chosen_as_documented(setup, alpha, seed):
    con, model, cal, _, Pc, _ = setup
    y = np.array([CLASSES.index(v) for v in cal["y"].to_pylist()])
    lam, k_reg, q, n = _raps_by_hand(Pc, y, alpha, seed)
    with pytest.warns(UserWarning, match=rf"RAPS's k_reg = {k_reg} and lambda = {lam:g} are chosen on {700 - n} "
                                         rf"tuning rows .* seed {seed}\), the threshold on the other {n}"):
        sets = conformal(model, cal, alpha, "raps", seed=seed, con=con).conformal
    assert (sets.lam, sets.k_reg, sets.counts) == (lam, k_reg, (n,))
    assert sets.thresholds[0] == pytest.approx(q, abs=1e-12)
    # a given value is kept and the other still chosen
    with pytest.warns(UserWarning, match=rf"RAPS's k_reg = {k_reg} is chosen on {700 - n} tuning rows .*lambda = 0.3 "
                                         "given"):
        assert conformal(model, cal, alpha, "raps", seed=seed, lam=0.3, con=con).conformal.k_reg == k_reg


def test_lambda_zero_is_aps(setup):
    con, model, cal, test, _, _ = setup
    raps = conformal(model, cal, ALPHA, "raps", lam=0.0, k_reg=1, con=con)
    aps = conformal(model, cal, ALPHA, "aps", con=con)
    assert raps.conformal.thresholds == aps.conformal.thresholds
    assert (sets_of(raps, test, con) == sets_of(aps, test, con)).all()


@pytest.fixture
def files(tmp_path):
    for name, (n, seed) in {"train": (500, 0), "cal": (600, 1), "test": (300, 2)}.items():
        pq.write_table(table(n, seed), tmp_path / f"{name}.parquet")
    db = tmp_path / "m.duckdb"
    assert invoke("fit", tmp_path / "train.parquet", "--label", "y", "--features", "x,z",
                  "--model", f"{db}:nb").exit_code == 0
    return tmp_path, db


def test_the_command_fits_raps_and_update_drops_it(files):
    tmp, db = files
    r = invoke("conformal", tmp / "cal.parquet", "--model", f"{db}:nb", "--method", "raps", "--seed", "4")
    assert r.exit_code == 0, r.stderr
    sets = sqlnb.load(str(db), "nb").conformal
    assert sets.method == "raps" and sets.lam in LAMBDAS and 1 <= sets.k_reg <= 3
    assert r.stdout == (f"conformal 'nb' in {db}: raps (lambda = {sets.lam:g}, k_reg = {sets.k_reg}) sets at alpha = 0.1 "
                        f"(threshold {sets.thresholds[0]:.6g} on {sets.counts[0]:,} rows of "
                        f"{str(tmp / 'cal.parquet')!r})\n")
    assert "RAPS's k_reg" in r.stderr and "seed 4" in r.stderr
    r = invoke("conformal", tmp / "cal.parquet", "--model", f"{db}:nb", "--method", "raps", "--lambda", "0.05",
               "--k-reg", "2", "--format", "json")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    assert '"lambda": 0.05' in r.stdout and '"k_reg": 2' in r.stdout
    m = sqlnb.load(str(db), "nb")
    assert m.conformal.counts[0] > 550  # every usable held-out row
    out = m.score(table(100, 3), duckdb.connect()).to_arrow_table().to_pylist()
    for row in out:  # the documented set from the scored probabilities
        p = [row[f"proba_{c}"] for c in "abc"]
        if p[0] is None:
            assert row["prediction_set"] is None
            continue
        want = [c for k, c in enumerate("abc") if sum(q for q in p if q > p[k]) + 0.05 * max(
            0, sum(q > p[k] for q in p) - 2) < m.conformal.thresholds[0]]
        assert row["prediction_set"] == want
    assert "raps (lambda = 0.05, k_reg = 2) sets" in invoke("show", "--model", f"{db}:nb").stdout
    r = invoke("update", tmp / "cal.parquet", "--model", f"{db}:nb")
    assert r.exit_code == 0 and "conformal sets were fitted on its old probabilities and are dropped" in r.stderr
    assert sqlnb.load(str(db), "nb").conformal is None
    with pytest.warns(UpdateWarning, match="conformal sets"):
        assert sqlnb.update(m, table(50, 4)).conformal is None


def test_bad_raps_input_is_one_line(files):
    tmp, db = files
    assert_error(invoke("conformal", tmp / "cal.parquet", "--model", f"{db}:nb", "--lambda", "0.1"),
                 "Error: --lambda applies to --method raps only, not lac")
    assert_error(invoke("conformal", tmp / "cal.parquet", "--model", f"{db}:nb", "--method", "aps", "--k-reg", "2"),
                 "Error: --k-reg applies to --method raps only, not aps")
    r = invoke("conformal", tmp / "cal.parquet", "--model", f"{db}:nb", "--method", "raps", "--lambda", "-1")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--lambda" in r.stderr
    pq.write_table(table(30, 1), tmp / "few.parquet")
    assert_error(invoke("conformal", tmp / "few.parquet", "--model", f"{db}:nb", "--method", "raps"),
                 "Error: ", "tuning rows (a fifth of the usable held-out rows) to choose RAPS's k_reg and lambda on, "
                 "fewer than the 9 that alpha = 0.1 needs; give more held-out rows, or give --k-reg and --lambda")
    assert sqlnb.load(str(db), "nb").conformal is None  # nothing written
    with pytest.raises(SqlnbError, match="--randomized applies to --method aps only, not raps"):
        conformal(sqlnb.load(str(db), "nb"), table(100, 1), 0.1, "raps", randomized=True)


def test_the_format3_fixture_scores_as_when_it_was_stored(tmp_path):
    con = fixture_scores_as_stored("format3_models.duckdb.gz", ("sets_raps", "sets_raps_given", "sets_mondrian_by"),
                                   tmp_path)
    given = sqlnb.load(con, "sets_raps_given").conformal
    assert (given.lam, given.k_reg) == (0.2, 1) and not math.isinf(given.thresholds[0])
    assert sqlnb.load(con, "sets_mondrian_by").conformal.groups == ("east", "north", "south", "west")


@pytest.fixture(scope="module")
def models():
    base = sqlnb.fit(table(400, 0), "y", features=["x", "z"])
    cal = table(400, 1)
    with pytest.warns(UserWarning, match="RAPS's k_reg"):
        chosen = conformal(base, cal, 0.1, "raps", seed=1)
    return {"raps": chosen, "raps_given": conformal(base, cal, 0.2, "raps", lam=0.5, k_reg=1)}


def test_sqlite_gives_duckdbs_raps_sets(models):
    sqlite_gives_duckdbs_sets(models)


@pytest.mark.postgres
def test_postgres_gives_duckdbs_raps_sets_and_stores_them(models):
    postgres_gives_duckdbs_sets_and_stores_them(models)


@pytest.mark.spark
def test_spark_gives_duckdbs_raps_sets_and_stores_them(models):
    spark_gives_duckdbs_sets_and_stores_one(models, "raps_given")
