"""Token bags (sqlnb.text): parity with scikit-learn's CountVectorizer + MultinomialNB /
BernoulliNB / ComplementNB, the seeds' spam example by hand, layouts, storage, updates."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.naive_bayes import BernoulliNB, ComplementNB, MultinomialNB
from sqlglot import exp

import sqlnb
from sqlnb.models.naive_bayes.text import DEFAULT_TOKEN_PATTERN

TOL = 1e-9
SK = {"multinomial": MultinomialNB, "bernoulli": BernoulliNB, "complement": ComplementNB}
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
         "sigma tau upsilon phi chi psi omega café naïve straße 日本語 x² a_b 42 Ab AB").split()


def corpus(seed: int, n: int = 80, k: int = 3):
    """Random documents whose word frequencies depend on the class (plus an empty one)."""
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(k), rng.integers(0, k, n - k)])
    docs = []
    for c in y:
        p = rng.dirichlet(np.ones(len(WORDS)) * 0.3) * 0.5 + np.roll(np.eye(len(WORDS))[0], 3 * c) * 0.5
        m = rng.integers(0, 12)
        docs.append(" ".join(rng.choice(WORDS, size=m, p=p / p.sum())) + rng.choice(["", " .", " I", ", ok"]))
    docs[-1] = ""
    return docs, np.array([f"c{c}" for c in y])


def proba(rel, model) -> np.ndarray:
    d = rel.to_arrow_table().to_pydict()
    return np.array([d[c] for c in model.proba_columns()], dtype=float).T


def score_texts(model, con, texts, column="text"):
    t = pa.table({column: pa.array(list(texts), pa.string()), "__row": np.arange(len(texts))})
    con.register("score_in", t)
    rel = model.score("score_in", con, outputs=("proba", "prediction"))
    return proba(con.sql(f'SELECT * FROM ({rel.sql_query()}) ORDER BY "__row"'), model)


@pytest.mark.parametrize("kind", ["multinomial", "bernoulli", "complement"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_sklearn_text(kind, seed):
    docs, y = corpus(seed)
    test_docs, _ = corpus(seed + 100, n=30)
    test_docs = test_docs + ["zzz unknown words only", "ALPHA Alpha alpha"]
    con = duckdb.connect()
    con.register("train", pa.table({"text": docs, "y": y}))
    alpha = [1.0, 0.5, 2.0][seed]
    model = sqlnb.fit("train", "y", con=con, feature_kinds={"text": kind}, alpha=alpha)
    vec = CountVectorizer(binary=kind == "bernoulli").fit(docs)
    assert model.stats.features["text"].terms == sorted(vec.vocabulary_)
    sk = SK[kind](alpha=alpha).fit(vec.transform(docs), y)
    np.testing.assert_allclose(score_texts(model, con, test_docs), sk.predict_proba(vec.transform(test_docs)),
                               atol=TOL, rtol=0)


@pytest.mark.parametrize("options,sk_options", [
    ({"min_df": 3}, {"min_df": 3}),
    ({"min_df": 0.1, "max_df": 0.5}, {"min_df": 0.1, "max_df": 0.5}),
    ({"max_features": 7}, {"max_features": 7}),
    ({"stop_words": ["alpha", "beta"], "lowercase": False}, {"stop_words": ["alpha", "beta"], "lowercase": False}),
    ({"token_pattern": r"\S+"}, {"token_pattern": r"\S+"}),
])
def test_vocabulary_options_match_countvectorizer(options, sk_options):
    docs, y = corpus(7, n=120)
    con = duckdb.connect()
    con.register("train", pa.table({"text": docs, "y": y}))
    model = sqlnb.fit("train", "y", con=con, feature_kinds={"text": "multinomial"}, text=options)
    vec = CountVectorizer(**sk_options).fit(docs)
    assert model.stats.features["text"].terms == sorted(vec.vocabulary_)
    sk = MultinomialNB().fit(vec.transform(docs), y)
    np.testing.assert_allclose(score_texts(model, con, docs), sk.predict_proba(vec.transform(docs)), atol=TOL, rtol=0)


def test_default_pattern_is_pythons_unicode_word_pattern():
    import re
    texts = ["café naïve", "x² ½ ①② 日本語 テキスト", "a_b __ 12 ab", "ǅungla e\u0301te", "isn't it ok-ish"]
    con = duckdb.connect()
    got = con.execute("SELECT [regexp_extract_all(lower(t), $p) FOR t IN $texts]",
                      {"p": DEFAULT_TOKEN_PATTERN, "texts": texts}).fetchall()[0][0]
    assert got == [re.findall(r"(?u)\b\w\w+\b", t.lower()) for t in texts]


@pytest.mark.parametrize("kind", ["multinomial", "bernoulli", "complement"])
def test_list_map_and_long_layouts_agree(kind):
    docs, y = corpus(3)
    vec = CountVectorizer().fit(docs)
    X = vec.transform(docs)
    analyzer = vec.build_analyzer()
    con = duckdb.connect()
    lists = [analyzer(d) for d in docs]
    maps = [{t: int(lists[i].count(t)) for t in set(lists[i])} for i in range(len(docs))]
    con.register("wide", pa.table({
        "id": np.arange(len(docs)), "y": y, "text": docs, "toks": lists,
        "m": pa.array([list(m.items()) for m in maps], pa.map_(pa.string(), pa.int64())),
        "x": np.arange(len(docs)) % 3}))
    con.execute("CREATE TABLE long AS SELECT id, unnest(map_keys(m)) AS token, unnest(map_values(m)) AS n FROM wide")
    con.execute("CREATE TABLE occ AS SELECT id, unnest(toks) AS token FROM wide")
    sk = SK[kind]().fit(X if kind != "bernoulli" else (X > 0).astype(float), y)
    ref = sk.predict_proba(X)
    for col in ("text", "toks", "m"):
        m = sqlnb.fit("wide", "y", con=con, features=[col], feature_kinds={col: kind})
        got = proba(con.sql(f'SELECT * FROM ({m.score("wide", con).sql_query()}) ORDER BY "id"'), m)
        np.testing.assert_allclose(got, ref, atol=TOL, rtol=0, err_msg=col)
    for table, count in (("long", "n"), ("occ", None)):
        m = sqlnb.fit_long(table, "wide", id="id", token="token", count=count, label="y", kind=kind, con=con)
        rel = m.score_long(table, con.sql("SELECT id FROM wide"), con=con)
        got = proba(con.sql(f'SELECT * FROM ({rel.sql_query()}) ORDER BY "id"'), m)
        # the empty last document has no token rows: it is scored from the docs table
        np.testing.assert_allclose(got, ref, atol=TOL, rtol=0, err_msg=table)


@pytest.mark.parametrize("kind", ["multinomial", "bernoulli", "complement"])
def test_integer_token_ids_fit_and_score_like_their_text(kind):
    """Token ids in a BIGINT column (a raw ArrowTypeError traceback before):
    the same probabilities as scikit-learn on the id counts, and as the ids written as
    text; an id never seen in training contributes nothing, an id scored as text matches."""
    rng = np.random.default_rng(4)
    n_docs, vocab = 40, 12
    y = np.array(["a", "b"])[rng.integers(0, 2, n_docs)]
    X = rng.poisson(np.where(y[:, None] == "a", np.linspace(0.2, 2, vocab), np.linspace(2, 0.2, vocab)))
    ids, toks = np.nonzero(X)
    con = duckdb.connect()
    con.register("long", pa.table({"id": ids.astype(np.int64), "token": (toks * 7 + 100).astype(np.int64),
                                   "n": X[ids, toks].astype(np.int64)}))
    con.register("doc_labels", pa.table({"id": np.arange(n_docs), "y": y}))
    con.execute("CREATE TABLE long_text AS SELECT id, CAST(token AS VARCHAR) AS token, n FROM long")
    sk = SK[kind]().fit(X if kind != "bernoulli" else (X > 0).astype(float), y)
    ref = sk.predict_proba(X)
    m = sqlnb.fit_long("long", "doc_labels", id="id", token="token", count="n", label="y", kind=kind, con=con)
    for table in ("long", "long_text"):
        rel = m.score_long(table, con.sql("SELECT id FROM doc_labels"), con=con)
        got = proba(con.sql(f'SELECT * FROM ({rel.sql_query()}) ORDER BY "id"'), m)
        np.testing.assert_allclose(got, ref, atol=TOL, rtol=0, err_msg=table)
    as_text = sqlnb.fit_long("long_text", "doc_labels", id="id", token="token", count="n", label="y", kind=kind, con=con)
    rel = as_text.score_long("long", con.sql("SELECT id FROM doc_labels"), con=con)
    np.testing.assert_allclose(proba(con.sql(f'SELECT * FROM ({rel.sql_query()}) ORDER BY "id"'), as_text), ref,
                               atol=TOL, rtol=0)


def test_mixed_model_shares_the_multinomial_denominator():
    docs, y = corpus(5)
    vec = CountVectorizer().fit(docs)
    X = vec.transform(docs)
    x = (np.arange(len(docs)) * 7) % 5
    con = duckdb.connect()
    con.register("train", pa.table({"text": docs, "x": x.astype(float), "y": y}))
    m = sqlnb.fit("train", "y", con=con, kind="multinomial")
    sk = MultinomialNB().fit(sp.hstack([X, x[:, None]]).tocsr(), y)
    got = proba(con.sql(f'SELECT * FROM ({m.score("train", con).sql_query()})'), m)
    np.testing.assert_allclose(got, sk.predict_proba(sp.hstack([X, x[:, None]]).tocsr()), atol=TOL, rtol=0)


def test_weights_save_load_merge_and_export():
    docs, y = corpus(9)
    w = np.linspace(0.5, 2.0, len(docs))
    vec = CountVectorizer(binary=True).fit(docs)
    X = vec.transform(docs)
    con = duckdb.connect()
    con.register("train", pa.table({"text": docs, "y": y, "w": w}))
    m = sqlnb.fit("train", "y", con=con, feature_kinds={"text": "bernoulli"}, weight="w")
    sk = BernoulliNB().fit(X, y, sample_weight=w)
    ref = sk.predict_proba(X)
    np.testing.assert_allclose(score_texts(m, con, docs), ref, atol=TOL, rtol=0)
    m.save(con, "spam")
    loaded = sqlnb.load(con, "spam")
    np.testing.assert_allclose(score_texts(loaded, con, docs), ref, atol=TOL, rtol=0)
    # two halves merged = the fit on all rows (the second half has words the first lacks)
    con.register("a", pa.table({"text": docs[:40], "y": y[:40], "w": w[:40]}))
    con.register("b", pa.table({"text": docs[40:], "y": y[40:], "w": w[40:]}))
    fa = sqlnb.fit("a", "y", con=con, feature_kinds={"text": "bernoulli"}, weight="w")
    fb = sqlnb.fit("b", "y", con=con, feature_kinds={"text": "bernoulli"}, weight="w")
    np.testing.assert_allclose(score_texts(fa.merge(fb), con, docs), ref, atol=TOL, rtol=0)
    # the exported SELECT is self-contained
    exported = m.to_sql(source="train")
    fresh = duckdb.connect()
    fresh.register("train", pa.table({"text": docs, "y": y, "w": w}))
    assert proba(fresh.sql(exported), m).shape == ref.shape


def test_seeds_spam_example_by_hand():
    """The spam example of seeds/000: ham "good", "very good"; spam "bad", "very bad",
    "very bad very bad"; test document "good bad very bad". Vocabulary (bad, good, very).

    Multinomial, counts. Per class totals: ham good 2, very 1, bad 0 (3 tokens);
    spam bad 4, very 3, good 0 (7 tokens). π = (2/5, 3/5). Test counts bad 2, good 1, very 1.

    * MLE: θ_ham,bad = 0/3 and θ_spam,good = 0/7: the test holds both words, so both joint
      likelihoods are 0 and the posterior is undefined: NULL probabilities and prediction.
    * Posterior mean α = 1 (Laplace): θ_ham = (bad 1/6, good 3/6, very 2/6),
      θ_spam = (bad 5/10, good 1/10, very 4/10).
      p(x, ham)  ∝ 2/5 · (1/6)² · (3/6) · (2/6) = 2/5 · 6/1296   = 1/540
      p(x, spam) ∝ 3/5 · (5/10)² · (1/10) · (4/10) = 3/5 · 100/10⁴ = 3/500
      p(spam | x) = (3/500) / (3/500 + 1/540) = 1620 / 2120 = 81/106 ≈ 0.7642.

    Bernoulli, presence. Documents with the word: ham good 2/2, very 1/2, bad 0/2;
    spam bad 3/3, very 2/3, good 0/3. The test holds all three words.

    * MLE: θ_ham,bad = 0 and θ_spam,good = 0 again: NULL.
    * α = 1: θ = (N_cj + 1)/(N_c + 2): ham (bad 1/4, good 3/4, very 2/4), spam (bad 4/5,
      good 1/5, very 3/5).
      p(x, ham)  ∝ 2/5 · 1/4 · 3/4 · 2/4 = 2/5 · 6/64  = 3/80
      p(x, spam) ∝ 3/5 · 4/5 · 1/5 · 3/5 = 3/5 · 12/125 = 36/625
      p(spam | x) = (36/625) / (36/625 + 3/80) = 576 / (576 + 375) = 192/317 ≈ 0.6057.
    """
    con = duckdb.connect()
    con.register("train", pa.table({"text": ["good", "very good", "bad", "very bad", "very bad very bad"],
                                    "y": ["ham", "ham", "spam", "spam", "spam"]}))
    expected = {"multinomial": 81 / 106, "bernoulli": 192 / 317}
    for kind, p_spam in expected.items():
        m = sqlnb.fit("train", "y", con=con, feature_kinds={"text": kind})
        np.testing.assert_allclose(score_texts(m, con, ["good bad very bad"]), [[1 - p_spam, p_spam]], atol=1e-12)
        mle = sqlnb.fit("train", "y", con=con, feature_kinds={"text": kind}, estimator="mle")
        t = pa.table({"text": ["good bad very bad"]})
        row = mle.score(t, con, outputs=("proba", "prediction", "log_evidence")).fetchall()[0]
        assert row[1] == -math.inf and row[2:] == (None, None, None), (kind, row)


def test_mutual_information_and_select_k():
    docs, y = corpus(11, n=150)
    con = duckdb.connect()
    con.register("train", pa.table({"text": docs, "y": y}))
    m = sqlnb.fit("train", "y", con=con, feature_kinds={"text": "bernoulli"})
    mi = sqlnb.mutual_information(m).to_pydict()
    # reference: the seeds' formula in numpy from document presence
    X = (CountVectorizer().fit(docs).transform(docs) > 0).toarray()
    vocab = sorted(CountVectorizer().fit(docs).vocabulary_)
    classes = np.unique(y)
    pi = np.array([np.mean(y == c) for c in classes])
    theta = np.array([X[y == c].mean(axis=0) for c in classes])
    tj = pi @ theta
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.where(theta > 0, theta * np.log(theta / tj), 0) + np.where(theta < 1, (1 - theta) * np.log((1 - theta) / (1 - tj)), 0)
    ref = dict(zip(vocab, (pi[:, None] * part).sum(axis=0)))
    for t, v in zip(mi["term"], mi["mi"]):
        assert v == pytest.approx(ref[t], abs=1e-12)
    assert mi["mi"] == sorted(mi["mi"], reverse=True)
    k5 = sqlnb.fit("train", "y", con=con, feature_kinds={"text": "bernoulli"}, text={"select_k": 5})
    assert k5.stats.features["text"].terms == sorted(mi["term"][:5])
    top = sqlnb.top_terms(m, n=3).to_pydict()
    assert set(top["class"]) <= set(classes) and max(top["rank"]) <= 3


def test_errors_name_the_column():
    con = duckdb.connect()
    con.register("t", pa.table({"d": [1.5, 2.0], "y": ["a", "b"], "text": ["x y", "z"]}))
    with pytest.raises(sqlnb.SqlnbError, match="'text'.*no term left"):
        sqlnb.fit("t", "y", con=con, features=["text"], feature_kinds={"text": "multinomial"})
    with pytest.raises(sqlnb.SqlnbError, match="min_df"):
        sqlnb.fit("t", "y", con=con, features=["text"], feature_kinds={"text": "multinomial"}, text={"min_df": 1.5})
    with pytest.raises(sqlnb.SqlnbError, match="unknown text option 'mindf'"):
        sqlnb.fit("t", "y", con=con, features=["text"], feature_kinds={"text": "multinomial"}, text={"mindf": 2})


# -- sms_spam (../shared/data) -----------------------------------------------------------------


@pytest.fixture(scope="module")
def sms():
    from support import shared_data as sd
    sd.require_shared_data("sms_spam")
    con = duckdb.connect()
    con.execute(sd.render(exp.Create(this=exp.to_table("sms"), kind="TABLE", expression=sd.sms_spam_query(row_id=True))))
    return con, sd.numpy_dataset("sms_spam")


def sms_cv_accuracy(con, y, kind="multinomial", seed=0):
    """5-fold stratified (StratifiedKFold(5, shuffle=True, random_state=seed)) accuracy of
    sqlnb on sms_spam: fit on four folds, predict the fifth, all in DuckDB."""
    from sklearn.model_selection import StratifiedKFold
    fold = np.empty(len(y), dtype=np.int64)
    for f, (_, test) in enumerate(StratifiedKFold(5, shuffle=True, random_state=seed).split(y, y)):
        fold[test] = f
    con.register("folds", pa.table({"row_id": np.arange(len(y)), "fold": fold}))
    correct = 0
    for f in range(5):
        train = sqlnb.Query(f'SELECT s.text, s.label FROM sms s JOIN folds USING (row_id) WHERE fold <> {f}')
        test = sqlnb.Query(f'SELECT s.text, s.label AS truth FROM sms s JOIN folds USING (row_id) WHERE fold = {f}')
        m = sqlnb.fit(train, "label", con=con, feature_kinds={"text": kind})
        rel = m.score(test, con, outputs=("prediction",), keep=["truth"])
        correct += con.sql(f'SELECT count(*) FILTER (WHERE prediction = truth) FROM ({rel.sql_query()})').fetchall()[0][0]
    return correct / len(y)


@pytest.mark.shared_data
@pytest.mark.parametrize("kind", ["multinomial", "bernoulli", "complement"])
def test_sms_spam_parity(sms, kind):
    con, ds = sms
    m = sqlnb.fit("sms", "label", con=con, features=["text"], feature_kinds={"text": kind})
    vec = CountVectorizer(binary=kind == "bernoulli").fit(ds.text)
    assert m.stats.features["text"].terms == sorted(vec.vocabulary_)
    X = vec.transform(ds.text)
    ref = SK[kind]().fit(X, ds.y).predict_proba(X)
    got = proba(con.sql(f'SELECT * FROM ({m.score("sms", con).sql_query()}) ORDER BY "row_id"'), m)
    np.testing.assert_allclose(got, ref, atol=TOL, rtol=0)


@pytest.mark.shared_data
def test_sms_spam_cross_validated_accuracy(sms):
    """docs/text.md quotes this figure (scikit-learn's CountVectorizer + MultinomialNB: 98.67 %)."""
    con, ds = sms
    assert sms_cv_accuracy(con, ds.y) >= 0.986


@pytest.mark.parametrize("min_df", [0, 1])
def test_default_vocabulary_without_the_pruning_query_equals_pruning_in_sql(min_df):
    """With CountVectorizer's default options the fit skips the SQL pruning statement and
    drops zero-frequency terms itself; a huge max_features forces the SQL path, which must
    give the same statistics (including a term whose only rows have count 0)."""
    rng = np.random.default_rng(5)
    cells: dict = {}  # one row per (document, term), as fit_long asks
    for d, t, n in zip(rng.integers(0, 60, 900), rng.zipf(1.5, 900) % 40, rng.integers(0, 4, 900)):
        cells[(int(d), f"t{int(t)}")] = cells.get((int(d), f"t{int(t)}"), 0) + int(n)
    rows = [(d, t, n) for (d, t), n in sorted(cells.items())] + [(1, "only_zero", 0), (2, "only_zero", 0)]
    tokens = pa.table({"id": [r[0] for r in rows], "token": [r[1] for r in rows], "n": [r[2] for r in rows]})
    docs = pa.table({"id": list(range(60)), "y": [int(v) for v in rng.integers(0, 3, 60)]})
    con = duckdb.connect()
    fast = sqlnb.fit_long(tokens, docs, id="id", token="token", count="n", label="y", con=con,
                          text={"min_df": min_df})
    via_sql = sqlnb.fit_long(tokens, docs, id="id", token="token", count="n", label="y", con=con,
                             text={"min_df": min_df, "max_features": 10**9})
    a, b = fast.stats.features["token"], via_sql.stats.features["token"]
    assert a.terms == b.terms and ("only_zero" in a.terms) == (min_df == 0)
    np.testing.assert_array_equal(a.total, b.total)
    np.testing.assert_array_equal(a.docs, b.docs)
    with pytest.raises(sqlnb.SqlnbError, match="negative count"):
        bad = tokens.set_column(2, "n", pa.array([r[2] for r in rows[:-1]] + [-1]))
        sqlnb.fit_long(bad, docs, id="id", token="token", count="n", label="y", con=con)
