"""Bag statistics: which columns are bags, their ``GROUP BY label, token`` counts with
vocabulary pruning, the bag family (document counts, score term, LATERAL join) and
the statistics as parameter-table parts.

The module docstring the code below refers to is the package's,
:mod:`sqlnb.models.naive_bayes.text`.
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.families import REGISTRY, Feature, is_numeric
from sqlnb.models.naive_bayes.families.base import Family, wcount
from sqlnb.models.naive_bayes.text.params import _NEG_INF, _scoring_rows, bag_sums
from sqlnb.models.naive_bayes.text.terms import mutual_information
from sqlnb.models.naive_bayes.text.tokens import (TextOptions, _counted, _duckdb, _is_text, _lateral, _not_null,
                                                  _opts, options_for)
from sqlnb.stats import Bag

BAG_KINDS = ("multinomial", "bernoulli", "complement")


def bag_layout(sql_type: str) -> str | None:
    """``text``, ``list`` or ``map`` for a column type that can be a bag; else None."""
    t = sql_type.strip()
    if t.endswith("[]"):
        return "list" if _is_text(t[:-2]) else None
    if t.upper().startswith("MAP(") and t.endswith(")"):
        key, _, value = t[4:-1].partition(",")
        return "map" if _is_text(key.strip()) and is_numeric(value.strip()) else None
    return "text" if _is_text(t) else None


def bag_feature(name: str, kind: str, sql_type: str, threshold: float, text: Any = None,
                layout: str | None = None, **extra) -> Feature:
    """A :class:`Feature` for a bag column (``layout`` from its type unless given)."""
    layout = layout or bag_layout(sql_type)
    if layout is None:
        raise SqlnbError(
            f"column {name!r} has type {sql_type}, which is not a bag of tokens; kind {kind!r} "
            "takes text (VARCHAR), VARCHAR[] or MAP(VARCHAR, <number>) columns, or numbers")
    if threshold < 0:
        raise SqlnbError(f"the Bernoulli threshold of bag {name!r} must be >= 0 (absent terms count 0), "
                         f"not {threshold!r}")
    opts = options_for(text, name)
    return Feature(name, kind, sql_type, float(threshold), bag={"layout": layout, **extra, **opts.to_dict()})


# -- fitting -------------------------------------------------------------------------------


def _aggregate_columns(k: exp.Expression, n: exp.Expression, w: exp.Expression | None,
                       threshold: float) -> list[exp.Expression]:
    """Per (label, token): ``total`` Σw·n, ``docs`` Σw·[n > t], ``least`` min(n), and for
    pruning the unweighted ``df`` (documents with n > 0) and ``utotal`` Σn — left out when
    they equal ``docs``/``total`` (unweighted, t = 0): each aggregate costs ~10 % of the
    statement at 13.6M rows."""
    n = sql.as_double(n)
    present = exp.GT(this=n.copy(), expression=sql.dbl(threshold))
    total = exp.Sum(this=n.copy() if w is None else exp.Mul(this=w.copy(), expression=n.copy()))
    cols = [
        exp.alias_(k, "k", quoted=True),
        exp.alias_(total, "total", quoted=True),
        exp.alias_(wcount(w, present), "docs", quoted=True),
        exp.alias_(exp.Min(this=n.copy()), "least", quoted=True),
    ]
    if w is not None or threshold != 0.0:
        cols.append(exp.alias_(wcount(None, exp.GT(this=n.copy(), expression=sql.dbl(0.0))), "df", quoted=True))
    if w is not None:
        cols.append(exp.alias_(exp.Sum(this=n.copy()), "utotal", quoted=True))
    return cols


def wide_counts_query(source, label: str, weight: str | None, feature: Feature,
                      where: exp.Expression | None = None) -> exp.Select:
    """``GROUP BY label, token`` over the unnested bag of a text, LIST or MAP column
    (of the rows meeting ``where``, e.g. one cross-validation fold)."""
    w = sql.as_double(sql.col(weight, "src")) if weight else None
    token = sql.col("token", "u")
    cols = _aggregate_columns(sql.col(label, "src"), sql.col("n", "u"), w, feature.threshold)
    cols.insert(1, exp.alias_(token.copy(), "token", quoted=True))
    q = exp.select(*cols).from_(source.from_("src"))
    q.append("joins", _lateral(_counted(feature), "u"))
    cond = _where(sql.col(label, "src"), token, feature)
    if where is not None:
        cond = exp.and_(cond, where)
    return q.where(cond).group_by(sql.col(label, "src"), token.copy())


def _where(label: exp.Expression, token: exp.Expression, feature: Feature) -> exp.Expression:
    cond = exp.and_(_not_null(label), _not_null(token.copy()))
    stop = feature.bag.get("stop_words") or []
    if stop:
        cond = exp.and_(cond, exp.Not(this=exp.In(this=token.copy(),
                                                  expressions=[exp.Literal.string(s) for s in stop])))
    return cond


def pruned_query(counts: exp.Select, opts: TextOptions, n_docs: float) -> exp.Select:
    """Keep the vocabulary ``CountVectorizer`` would (module docstring), in SQL."""
    def bound(v):
        return float(v) if isinstance(v, numbers.Integral) else float(v) * n_docs
    names = {e.alias_or_name for e in counts.expressions}
    df = exp.Sum(this=sql.col("df" if "df" in names else "docs"))
    vocab = (exp.select(sql.col("token")).from_(sql.table("agg")).group_by(sql.col("token"))
             .having(exp.and_(exp.GTE(this=df, expression=sql.dbl(bound(opts.min_df))),
                              exp.LTE(this=df.copy(), expression=sql.dbl(bound(opts.max_df))))))
    if opts.max_features is not None:
        vocab = vocab.order_by(exp.Ordered(this=exp.Sum(this=sql.col("utotal" if "utotal" in names else "total")),
                                           desc=True),
                               exp.Ordered(this=sql.col("token"))).limit(opts.max_features)
    least = exp.Subquery(this=exp.select(exp.Min(this=sql.col("least"))).from_(sql.table("agg")))
    return (exp.select(sql.col("k"), sql.col("token"), sql.col("total"), sql.col("docs"),
                       exp.alias_(least, "least", quoted=True))
            .from_(sql.table("agg"))
            .where(exp.In(this=sql.col("token"), query=exp.Subquery(this=vocab)))
            .with_(sql.ident("agg"), as_=counts))


def _keeps_every_term(opts: "TextOptions") -> bool:
    """Whether the pruning options keep every term with a non-zero document frequency."""
    return (opts.max_features is None and isinstance(opts.min_df, numbers.Integral) and opts.min_df <= 1
            and not isinstance(opts.max_df, numbers.Integral) and opts.max_df >= 1.0)


def prunes(feature: Feature) -> bool:
    """Whether a bag's vocabulary is chosen from the rows it is counted on as a whole
    (``min_df``, ``max_df``, ``max_features``, ``select_k``): then the statistics of
    disjoint row sets do not merge to those of their union (each pruned on its own rows)."""
    opts = _opts(feature)
    return not _keeps_every_term(opts) or opts.select_k is not None


def bag_statistics(con, counts: exp.Select, feature: Feature, classes: list, n: np.ndarray,
                   rows: np.ndarray, where: str) -> Bag:
    """Run ``counts`` (pruned) and gather a :class:`Bag`; apply ``select_k``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    opts = _opts(feature)
    if _keeps_every_term(opts):
        # CountVectorizer's defaults (min_df=1, max_df=1.0, no max_features) keep every
        # term that occurs in a document: no second GROUP BY token in SQL (~20 % of the
        # fit at 13.6M token rows); terms with df = 0 (only zero counts) are dropped here.
        table = _duckdb(con).sql(sql.render(counts)).to_arrow_table()
        least = pc.min(table["least"]).as_py() if table.num_rows else None  # over all rows, as in SQL
        df = table["df" if "df" in table.column_names else "docs"]
        if opts.min_df >= 1 and table.num_rows:
            seen = pc.unique(pc.filter(table["token"], pc.greater(df, 0)))
            table = table.filter(pc.is_in(table["token"], value_set=seen))
        table = table.select(["k", "token", "total", "docs"]).append_column("least", pa.array([least] * table.num_rows, pa.float64()))
    else:
        table = _duckdb(con).sql(sql.render(pruned_query(counts, opts, float(np.sum(rows))))).to_arrow_table()
    if table.num_rows == 0:
        raise SqlnbError(f"bag {feature.name!r} in {where} has no term left (no token, or min_df/max_df "
                         "pruned them all); check the data, token_pattern and min_df")
    least = table["least"][0].as_py()
    if least is not None and least < 0:
        raise SqlnbError(f"bag {feature.name!r} in {where} has a negative count ({least}); "
                         "token counts must be >= 0")
    terms = pc.unique(table["token"]).sort()
    labels = table["k"].dictionary_encode().combine_chunks()
    index = {v: i for i, v in enumerate(classes)}
    kpos = np.array([index.get(v, -1) for v in labels.dictionary.to_pylist()])[labels.indices.to_numpy()]
    tpos = pc.index_in(table["token"], value_set=terms).to_numpy(zero_copy_only=False)
    K, V = len(classes), len(terms)
    total, docs = np.zeros((K, V)), np.zeros((K, V))
    keep = kpos >= 0
    total[kpos[keep], tpos[keep]] = table["total"].to_numpy(zero_copy_only=False)[keep]
    docs[kpos[keep], tpos[keep]] = table["docs"].to_numpy(zero_copy_only=False)[keep]
    if not np.all(np.isfinite(total)):
        raise SqlnbError(f"bag {feature.name!r} in {where} has NaN or infinite counts; replace them with 0")
    bag = Bag(terms.to_pylist(), np.asarray(n, float), np.asarray(rows, float), total, docs)
    if opts.select_k is not None and opts.select_k < len(bag.terms):
        mi = mutual_information(bag, con=_duckdb(con))
        bag = bag.keep_terms(mi["term"].to_pylist()[:opts.select_k])
    return bag


def collect_bags(engine, source, label: str, weight: str | None, features: Sequence[Feature],
                 classes: list, feats: dict, where: exp.Expression | None = None) -> None:
    """Fill the per-term statistics of the bag columns (after the wide scan gave their
    document counts): one ``GROUP BY label, token`` statement per bag, over the rows
    meeting ``where`` (a cross-validation fold; default all). With pruning options each
    call prunes its own rows' vocabulary, so merged folds hold the union of those."""
    for f in features:
        if f.bag is None:
            continue
        partial = feats[f.name]
        feats[f.name] = bag_statistics(engine, wide_counts_query(source, label, weight, f, where), f, classes,
                                       partial.n, partial.rows, source.description)


# -- the bag family -------------------------------------------------------------------------


class BagFamily(Family):
    """The family-side hooks of a bag feature (whatever its kind): its document counts in
    the wide scan, and its score term and LATERAL join (see the module docstring)."""

    name = "bag"

    def aggregates(self, feature, weight):
        x = sql.col(feature.name, "src")
        return [wcount(weight, _not_null(x)), exp.Count(this=x.copy())]

    def collect(self, feature, rows, classes, where):
        n = np.array([float(r[0] or 0) for r in rows])
        return Bag([], n, np.array([float(r[1] or 0) for r in rows]), np.zeros((len(n), 0)), np.zeros((len(n), 0)))

    # -- scoring ----------------------------------------------------------------------------
    @staticmethod
    def alias(feature) -> str:
        return f"bag {feature.name}"

    def join(self, feature, params) -> exp.Join:
        if feature.bag["layout"] == "long":
            raise SqlnbError(f"this model was fitted on a long token table ({feature.name!r}); "
                             "score it with model.score_long(tokens, docs)")
        return _lateral(bag_sums(feature, params, _scoring_rows(feature)), self.alias(feature))

    def term(self, feature, params, k):
        s = exp.Coalesce(this=sql.col(f"s{k}", self.alias(feature)), expressions=[sql.dbl(0.0)])
        if feature.kind != "bernoulli":
            return s
        # Bernoulli: const_c + Σ_present (flp − neg) for every non-NULL bag. A class with
        # m_c terms of θ = 1 (MLE only) has neg = −inf there: the document must hold all
        # of them, else its score is −inf (never −inf + inf = NaN).
        body: exp.Expression = exp.Add(this=sql.dbl(float(params.const[k])), expression=s)
        if params.m[k] > 0:
            hits = exp.Coalesce(this=sql.col(f"i{k}", self.alias(feature)), expressions=[sql.dbl(0.0)])
            body = exp.Case(ifs=[exp.If(this=exp.LT(this=hits, expression=sql.dbl(float(params.m[k]))),
                                        true=sql.dbl(_NEG_INF))], default=body)
        if feature.bag["layout"] == "long":
            return body
        return exp.Case(ifs=[exp.If(this=exp.Is(this=sql.col(feature.name, "src"), expression=exp.Null()),
                                    true=sql.dbl(0.0))], default=body)


BAG = BagFamily()


def family_for(feature: Feature) -> Family:
    """The object providing ``feature``'s aggregates, score term and join."""
    return BAG if feature.bag is not None else REGISTRY[feature.kind]


# -- storage ---------------------------------------------------------------------------------


def bag_tables(j: int, bag: Bag) -> dict:
    """Parameter-table parts of bag feature ``j``: ``bag_<j>_terms`` (term_index, term),
    ``bag_<j>_docs`` (class_index, n, rows) and ``bag_<j>_counts`` (class_index,
    term_index, total, docs; non-zero cells only)."""
    import pyarrow as pa
    ks, vs = np.nonzero((bag.total != 0) | (bag.docs != 0))
    K = len(bag.n)
    return {
        f"bag_{j}_terms": (pa.table({"term_index": pa.array(range(len(bag.terms)), pa.int32()),
                                     "term": pa.array(bag.terms, pa.string())}), {}),
        f"bag_{j}_docs": (pa.table({"class_index": pa.array(range(K), pa.int32()),
                                    "n": pa.array(bag.n, pa.float64()), "rows": pa.array(bag.rows, pa.float64())}), {}),
        f"bag_{j}_counts": (pa.table({"class_index": pa.array(ks, pa.int32()), "term_index": pa.array(vs, pa.int32()),
                                      "total": pa.array(bag.total[ks, vs], pa.float64()),
                                      "docs": pa.array(bag.docs[ks, vs], pa.float64())}), {}),
    }


def bag_from_tables(j: int, tables: dict, K: int) -> Bag:
    """Inverse of :func:`bag_tables`."""
    terms = tables[f"bag_{j}_terms"].sort_by("term_index")["term"].to_pylist()
    d = tables[f"bag_{j}_docs"].sort_by("class_index")
    c = tables[f"bag_{j}_counts"]
    total, docs = np.zeros((K, len(terms))), np.zeros((K, len(terms)))
    ks, vs = c["class_index"].to_numpy(), c["term_index"].to_numpy()
    total[ks, vs] = c["total"].to_numpy()
    docs[ks, vs] = c["docs"].to_numpy()
    return Bag(terms, d["n"].to_numpy().astype(float), d["rows"].to_numpy().astype(float), total, docs)
