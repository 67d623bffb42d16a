"""Training log-likelihood log p(D|θ) and BIC from the statistics:
equal to the per-row sum of ln p(x_row, y_row) — the scoring query's ``jll`` at each row's
own label — summed in numpy, NULLs included, for every family it covers."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.models.naive_bayes.likelihood import free_parameters
from support.cli import invoke

RNG = np.random.default_rng(16)
N = 240
Y = RNG.integers(0, 3, N)


def _masked(values, p=0.08):
    return pa.array(values, mask=RNG.random(N) < p)


TABLES = {
    "gaussian": pa.table({"g1": _masked(RNG.normal(Y * 1.3, 1.0 + Y)), "g2": _masked(RNG.normal(-Y, 2.0)),
                          "y": Y}),
    "categorical": pa.table({"c1": _masked(np.array(["r", "g", "b", "k"])[(Y + RNG.integers(0, 2, N)) % 4]),
                             "c2": _masked(RNG.integers(0, 3, N) * (Y > 0)), "y": Y}),
    "bernoulli": pa.table({"b1": _masked((RNG.random(N) < 0.2 + 0.3 * Y).astype(float)),
                           "b2": _masked((RNG.random(N) < 0.5).astype(float)), "y": Y}),
    "multinomial": pa.table({"m1": _masked(RNG.poisson(1 + Y).astype(float)),
                             "m2": _masked(RNG.poisson(3 - Y).astype(float)),
                             "m3": _masked(RNG.poisson(2, N).astype(float)), "y": Y}),
}
KINDS = {"gaussian": {}, "categorical": {"c1": "categorical", "c2": "categorical"},
         "bernoulli": {"b1": "bernoulli", "b2": "bernoulli"},
         "multinomial": {"m1": "multinomial", "m2": "multinomial", "m3": "multinomial"}}
MIXED = pa.table({**{c: TABLES["gaussian"][c] for c in ("g1",)}, **{c: TABLES["categorical"][c] for c in ("c1",)},
                  **{c: TABLES["bernoulli"][c] for c in ("b1",)},
                  **{c: TABLES["multinomial"][c] for c in ("m1", "m2")}, "y": Y})
MIXED_KINDS = {"c1": "categorical", "b1": "bernoulli", "m1": "multinomial", "m2": "multinomial"}


def _per_row(model, table) -> float:
    """Σ_rows jll_{y_row}(row), from the scoring query's joint log-likelihoods."""
    scored = model.score(table, outputs=("jll",)).fetchnumpy()
    jll = np.column_stack([scored[f"jll_{c}"] for c in model.classes])
    assert jll.shape == (table.num_rows, len(model.classes))
    return float(np.sum(jll[np.arange(table.num_rows), np.searchsorted(model.classes, Y)]))


CASES = [(name, TABLES[name], KINDS[name]) for name in TABLES] + [("mixed", MIXED, MIXED_KINDS)]


@pytest.mark.parametrize("name,table,kinds", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("hyper", [{}, {"estimator": "map", "alpha": 2.0, "class_prior": "dirichlet",
                                        "prior_alpha": {0: 3.0}, "tied_variance": True}],
                         ids=["default", "map-dirichlet-tied"])
def test_equals_the_per_row_sum(name, table, kinds, hyper):
    model = sqlnb.fit(table, "y", feature_kinds=kinds, screen=False, **hyper)
    assert [f.kind for f in model.features if f.name in kinds] == list(kinds.values())
    want = _per_row(model, table)
    got = model.log_likelihood()
    assert math.isfinite(got) and abs(got - want) <= 1e-9 * abs(want), (got, want)
    n = float(N)
    assert model.bic() == pytest.approx(-2 * got + free_parameters(model) * math.log(n), rel=1e-15)


def test_weighted_fit_weights_each_row():
    """With a weight column, log p(D|θ) = Σ_rows w · ln p(x_row, y_row)."""
    w = RNG.uniform(0.2, 3.0, N)
    t = MIXED.append_column("w", pa.array(w))
    model = sqlnb.fit(t, "y", feature_kinds=MIXED_KINDS, weight="w", screen=False)
    scored = model.score(MIXED, outputs=("jll",)).fetchnumpy()
    jll = np.column_stack([scored[f"jll_{c}"] for c in model.classes])
    want = float(np.sum(w * jll[np.arange(N), np.searchsorted(model.classes, Y)]))
    assert abs(model.log_likelihood() - want) <= 1e-9 * abs(want)
    assert model.bic() == pytest.approx(-2 * want + free_parameters(model) * math.log(w.sum()), rel=1e-9)


def test_gaussian_by_hand_and_parameter_count():
    """One feature, no NULLs: the normal log-density summed row by row in numpy."""
    x = RNG.normal(Y, 1.0)
    t = pa.table({"x": x, "y": Y})
    m = sqlnb.fit(t, "y")
    mean, var = m.log_parameters()["x"]
    prior = m.log_parameters()["prior"]
    want = sum(prior[y] - 0.5 * math.log(2 * math.pi * var[y]) - (v - mean[y]) ** 2 / (2 * var[y])
               for v, y in zip(x, Y))
    assert m.log_likelihood() == pytest.approx(want, rel=1e-12)
    K = 3
    assert free_parameters(m) == (K - 1) + 2 * K
    assert free_parameters(m.with_params(tied_variance=True)) == (K - 1) + K + 1
    assert free_parameters(m.with_params(class_prior="uniform")) == 2 * K
    mixed = sqlnb.fit(MIXED, "y", feature_kinds=MIXED_KINDS, screen=False)
    values = len(mixed.stats.features["c1"].values)
    # prior, g1 (2K), c1 K(V−1), b1 (K), m1 + m2 one distribution K(2 − 1)
    assert free_parameters(mixed) == (K - 1) + 2 * K + K * (values - 1) + K + K * (2 - 1)


def test_not_covered_says_so():
    t = pa.table({"m1": TABLES["multinomial"]["m1"], "m2": TABLES["multinomial"]["m2"], "y": Y})
    comp = sqlnb.fit(t, "y", feature_kinds={"m1": "complement", "m2": "complement"}, screen=False)
    with pytest.raises(sqlnb.SqlnbError, match="n/a for complement"):
        comp.log_likelihood()


def test_show_text_and_json(tmp_path):
    pq.write_table(MIXED, tmp_path / "t.parquet")
    db = f"{tmp_path}/m.duckdb"
    args = ["fit", tmp_path / "t.parquet", "--label", "y", "--model", f"{db}:mix"]
    for col, kind in MIXED_KINDS.items():
        args += ["--feature-kind", f"{col}={kind}"]
    assert invoke(*args).exit_code == 0
    model = sqlnb.load(db, "mix")
    d = json.loads(invoke("show", "--model", f"{db}:mix", "--format", "json").stdout)["likelihood"]
    assert d["log_likelihood"] == pytest.approx(_per_row(model, MIXED), rel=1e-9)
    assert d["bic"] == model.bic() and d["parameters"] == free_parameters(model) and d["rows"] == N
    text = invoke("show", "--model", f"{db}:mix").stdout
    line = next(s for s in text.splitlines() if s.startswith("likelihood"))
    assert f"log p(D|θ) = {d['log_likelihood']:,.2f}, BIC = {d['bic']:,.2f} ({d['parameters']} free parameters, N = 240)" in line
    pq.write_table(pa.table({"x": RNG.normal(Y, 1.0), "y": Y}), tmp_path / "full.parquet")
    lda = invoke("fit", tmp_path / "full.parquet", "--label", "y", "--kind", "lda", "--model", f"{db}:lda")
    assert lda.exit_code == 0, lda.stderr
    assert "likelihood" not in invoke("show", "--model", f"{db}:lda").stdout
