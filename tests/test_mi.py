"""Mutual information of every discrete feature with the class:
``sqlnb mi``, ``Model.mutual_information()`` and ``select_k`` at fit, against
scikit-learn's ``mutual_info_score`` / ``SelectKBest(mutual_info_classif)``."""

from __future__ import annotations

import json
from functools import partial

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.feature_selection import SelectKBest, mutual_info_classif
from sklearn.metrics import mutual_info_score
from sqlglot import exp

import sqlnb
from sqlnb.models.naive_bayes.information import presence_mi, table_mi
from support.cli import invoke


def _non_null_mi(x, y) -> float:
    """mutual_info_score over the rows where x is not NULL."""
    keep = np.array([v is not None for v in x])
    return mutual_info_score(np.asarray(x, dtype=object)[keep].astype(str), np.asarray(y)[keep])


# -- mushroom and votes: `sqlnb mi` = mutual_info_score per column ---------------------------

@pytest.mark.parametrize("name", ["mushroom", "votes"])
def test_cli_mi_equals_mutual_info_score(name, tmp_path):
    from support import shared_data as sd
    sd.require_shared_data(name)
    label = sd.LABEL_COLUMN[name]
    db = tmp_path / "d.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(sd.render(exp.Create(this=exp.to_table(name), kind="TABLE", expression=sd.query(name))))
        data = con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
    r = invoke("mi", f"{db}:{name}", "--label", label, "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    y = np.array(data[label].to_pylist())
    features = [c for c in data.column_names if c != label]
    got = {row["feature"]: row["mi"] for row in out["features"]}
    assert sorted(got) == sorted(features) and out["no_mi"] == []
    for c in features:
        assert got[c] == pytest.approx(_non_null_mi(data[c].to_pylist(), y), abs=1e-12), c
    mis = [row["mi"] for row in out["features"]]
    assert mis == sorted(mis, reverse=True)
    if name == "mushroom":  # stalk-root has '?' (NULL): 2,480 rows are left out of its MI only
        assert data["stalk-root"].null_count == 2480
        assert got["veil-type"] == 0.0  # one value: no information


# -- every family, and the model against the data ---------------------------------------------

def _mixed(n=400, seed=5):
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 3, n)
    x = rng.normal(k, 1.0)
    colour = np.array(["red", "green", "blue", "grey"])[(k + rng.integers(0, 2, n)) % 4].astype(object)
    colour[rng.random(n) < 0.1] = None
    count = rng.poisson(1 + k).astype(float)
    words = np.array(["spam", "ham", "eggs", "tea", "cake"])
    text = [" ".join(rng.choice(words[: 3 + (j % 3)], rng.integers(1, 4))) for j in k]
    text = [None if rng.random() < 0.05 else t for t in text]
    return pa.table({"x": x, "colour": pa.array(colour.tolist(), pa.string()),
                     "count": pa.array(count, pa.float64(), mask=rng.random(n) < 0.05),
                     "text": pa.array(text, pa.string()), "g": rng.normal(size=n),
                     "y": np.array(["a", "b", "c"])[k].tolist()})


def test_model_mi_equals_mutual_info_score_for_every_family(tmp_path):
    t = _mixed()
    con = duckdb.connect()
    con.register("t", t)
    m = sqlnb.fit("t", "y", con=con, bins={"x": "mdl"}, feature_kinds={"count": "bernoulli", "text": "bernoulli"},
                  binarize={"count": 1.5})
    table = m.mutual_information()
    rows = table.to_pylist()
    assert table.schema.metadata[b"skipped"] == b"g"  # Gaussian: no discrete values
    y = np.array(t["y"].to_pylist())
    got = {(r["feature"], r["term"]): r["mi"] for r in rows}
    # binned: the bins of the stored cut points
    edges = np.array(m.features[0].edges)
    assert len(edges) >= 1
    assert got[("x", None)] == pytest.approx(mutual_info_score(np.searchsorted(edges, t["x"].to_numpy(), side="right"), y),
                                             abs=1e-12)
    assert got[("colour", None)] == pytest.approx(_non_null_mi(t["colour"].to_pylist(), y), abs=1e-12)
    count = t["count"].to_pylist()
    assert got[("count", None)] == pytest.approx(
        _non_null_mi([None if v is None else v > 1.5 for v in count], y), abs=1e-12)
    texts = t["text"].to_pylist()
    for term in ("spam", "ham", "eggs", "tea", "cake"):
        present = [None if d is None else term in d.split() for d in texts]
        assert got[("text", term)] == pytest.approx(_non_null_mi(present, y), abs=1e-12), term
    assert [r["mi"] for r in rows] == sorted((r["mi"] for r in rows), reverse=True)
    # from a stored model: the same numbers without the data
    db = duckdb.connect(str(tmp_path / "m.duckdb"))
    m.save(db, "m")
    assert sqlnb.load(db, "m").mutual_information().to_pylist() == rows
    # `sqlnb mi` on the data (one scan) gives the model's numbers
    import pyarrow.parquet as pq
    pq.write_table(t, tmp_path / "t.parquet")
    r = invoke("mi", tmp_path / "t.parquet", "--label", "y", "--bins", "x=mdl", "--feature-kind",
               "count=bernoulli,text=bernoulli", "--binarize", "count=1.5", "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [(o["feature"], o["term"]) for o in out["features"]] == [(o["feature"], o["term"]) for o in rows]
    np.testing.assert_allclose([o["mi"] for o in out["features"]], [o["mi"] for o in rows], rtol=0, atol=1e-15)
    assert out["no_mi"] == ["g"] and out["rows"] == t.num_rows
    text = invoke("mi", tmp_path / "t.parquet", "--label", "y", "--select-k", "2")
    assert text.exit_code == 0 and len(text.stdout.strip().splitlines()) == 3  # header + 2
    assert "no mutual information for x, count, g" in text.stderr  # gaussian by default here


def test_table_and_presence_mi_match_sklearn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 500)
    x = (y + rng.integers(0, 3, 500)) % 5
    table = np.zeros((4, 5))
    np.add.at(table, (y, x), 1)
    assert table_mi(table) == pytest.approx(mutual_info_score(x, y), abs=1e-14)
    assert table_mi(np.ones((3, 4))) == 0.0
    b = rng.random((500, 6)) < (0.2 + 0.15 * y)[:, None]
    present = np.array([b[y == c].sum(axis=0) for c in range(4)])
    n = np.bincount(y, minlength=4)
    np.testing.assert_allclose(presence_mi(present, n), [mutual_info_score(b[:, j], y) for j in range(6)],
                               atol=1e-14)


# -- select_k ---------------------------------------------------------------------------------

def test_select_k_keeps_the_most_informative_columns_and_drops_the_rest():
    t = _mixed()
    t = t.append_column("b_copy", t["colour"]).append_column("a_copy", t["colour"])
    con = duckdb.connect()
    con.register("t", t)
    plan = dict(bins={"x": "mdl"}, feature_kinds={"count": "bernoulli", "text": "bernoulli"}, binarize={"count": 1.5})
    full = sqlnb.fit("t", "y", con=con, **plan)
    ranked = full.mutual_information().to_pylist()
    for k in (1, 3, 5):
        m = sqlnb.fit("t", "y", con=con, select_k=k, **plan)
        best = ranked[:k]
        kept_columns = {r["feature"] for r in best if r["term"] is None}
        kept_terms = sorted(r["term"] for r in best if r["term"] is not None)
        names = [f.name for f in m.features]
        assert "g" in names  # no MI: kept as it is
        assert set(names) - {"g", "text"} == kept_columns
        assert (m.stats.features["text"].terms if "text" in names else []) == kept_terms
        assert m.report["select_k"]["k"] == k
    # ties by name: the copies of colour have its MI exactly; a_copy comes first
    top = [r["feature"] for r in ranked[:3]]
    assert top == ["a_copy", "b_copy", "colour"], ranked[:4]
    m = sqlnb.fit("t", "y", con=con, select_k=1, **plan)
    assert [f.name for f in m.features] == ["g", "a_copy"]  # source order
    # the scoring SELECT reads only the kept columns: a source without the others scores
    sql = m.to_sql(source="t")
    assert '"colour"' not in sql and '"text"' not in sql
    con.register("few", t.select(["a_copy", "g"]))
    got = m.score("few", con, outputs=("prediction",)).fetchall()
    assert len(got) == t.num_rows
    with pytest.raises(sqlnb.SqlnbError, match="whole number >= 1"):
        sqlnb.fit("t", "y", con=con, select_k=0)


def test_cli_fit_select_k(tmp_path):
    import pyarrow.parquet as pq
    t = _mixed()
    pq.write_table(t, tmp_path / "t.parquet")
    model = f"{tmp_path / 'm.duckdb'}:m"
    r = invoke("fit", tmp_path / "t.parquet", "--label", "y", "--feature-kind", "text=bernoulli", "--bins", "x=mdl",
               "--select-k", "2", "--model", model)
    assert r.exit_code == 0, r.output
    with duckdb.connect(str(tmp_path / "m.duckdb")) as db:
        m = sqlnb.load(db, "m")
    want = sqlnb.fit(t, "y", feature_kinds={"text": "bernoulli"}, bins={"x": "mdl"}, select_k=2)
    assert [f.name for f in m.features] == [f.name for f in want.features]
    assert m.report["select_k"] == want.report["select_k"]


def test_sms_select_k_keeps_selectkbest_terms():
    """SelectKBest(mutual_info_classif, discrete_features=True) on the binary document-term
    matrix (CountVectorizer(binary=True): a term's presence, what sqlnb ranks bag terms
    by) keeps the terms ``select_k`` keeps. Terms in >= 20 messages (min_df=20 on both
    sides) keep scikit-learn's per-column loop to a few seconds."""
    from support import shared_data as sd
    sd.require_shared_data("sms_spam")
    con = duckdb.connect()
    con.execute(sd.render(exp.Create(this=exp.to_table("sms"), kind="TABLE", expression=sd.sms_spam_query())))
    rows = con.sql('SELECT "label", "text" FROM "sms"').fetchall()
    docs, y = [r[1] for r in rows], np.array([r[0] for r in rows])
    vec = CountVectorizer(binary=True, min_df=20).fit(docs)
    X = vec.transform(docs)
    vocab = vec.get_feature_names_out()
    K = 40
    sk = SelectKBest(partial(mutual_info_classif, discrete_features=True), k=K).fit(X, y)
    scores = np.sort(sk.scores_)[::-1]
    assert scores[K - 1] > scores[K]  # no tie at the cut: the kept set is well defined
    m = sqlnb.fit("sms", "label", con=con, features=["text"], feature_kinds={"text": "bernoulli"},
                  text={"min_df": 20}, select_k=K)
    assert m.stats.features["text"].terms == sorted(vocab[sk.get_support()])
    full = sqlnb.fit("sms", "label", con=con, features=["text"], feature_kinds={"text": "bernoulli"},
                     text={"min_df": 20})
    got = {r["term"]: r["mi"] for r in full.mutual_information().to_pylist()}
    assert sorted(got) == sorted(vocab)
    np.testing.assert_allclose([got[t] for t in vocab], sk.scores_, atol=1e-12)
