"""Mutual information between each term's presence and the class, and each class's top
terms, computed in SQL from a bag's statistics.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.text.tokens import _duckdb, _sub
from sqlnb.stats import Bag
from sqlnb.engines.duckdb import new_connection


# -- mutual information and top terms --------------------------------------------------------


def _stats_of(model_or_bag: Any, feature: str | None) -> tuple[Bag, list]:
    if isinstance(model_or_bag, Bag):
        return model_or_bag, list(range(len(model_or_bag.n)))
    bags = [f.name for f in model_or_bag.features if f.bag is not None]
    if not bags:
        raise SqlnbError("this model has no token bag (text, LIST or MAP feature)")
    name = feature if feature is not None else bags[0]
    if name not in bags:
        raise SqlnbError(f"{name!r} is not a token bag of this model; its bags are: {', '.join(bags)}")
    return model_or_bag.stats.features[name], list(model_or_bag.classes)


@contextmanager
def _registered(con, bag: Bag) -> Iterator[dict]:
    """The bag's statistics registered in ``con`` as Arrow tables (names by part) while
    the block runs."""
    import pyarrow as pa
    ks, vs = np.nonzero(bag.docs)
    names = {p: f"sqlnb_bag_{p}_{uuid.uuid4().hex[:8]}" for p in ("classes", "terms", "docs")}
    con.register(names["classes"], pa.table({"class_index": np.arange(len(bag.n), dtype=np.int32),
                                             "n": np.asarray(bag.n, float)}))
    con.register(names["terms"], pa.table({"term_index": np.arange(len(bag.terms), dtype=np.int32),
                                           "term": pa.array(bag.terms, pa.string())}))
    con.register(names["docs"], pa.table({"class_index": ks.astype(np.int32), "term_index": vs.astype(np.int32),
                                          "docs": bag.docs[ks, vs]}))
    try:
        yield names
    finally:
        for name in names.values():
            con.unregister(name)


def _cells_query(names: dict) -> exp.Select:
    """Per (term, class with documents): π_c, θ_jc = docs/N_c (MLE, document presence)
    and θ_j = Σ_c π_c θ_jc."""
    cls = exp.select(sql.col("class_index"), sql.col("n"),
                     exp.alias_(exp.Div(this=sql.col("n"), expression=exp.Window(
                         this=exp.Sum(this=sql.col("n")))), "pi", quoted=True)
                     ).from_(sql.table(names["classes"])).where(exp.GT(this=sql.col("n"), expression=sql.dbl(0.0)))
    theta = exp.Div(this=exp.Coalesce(this=sql.col("docs", "d"), expressions=[sql.dbl(0.0)]),
                    expression=sql.col("n", "c"))
    cells = (exp.select(sql.col("term_index", "t"), sql.col("term", "t"), sql.col("class_index", "c"),
                        sql.col("pi", "c"), exp.alias_(theta, "theta", quoted=True))
             .from_(exp.alias_(sql.table(names["terms"]), "t", table=True, quoted=True))
             .join(_sub(cls, "c"), join_type="CROSS")
             .join(exp.alias_(sql.table(names["docs"]), "d", table=True, quoted=True), join_type="LEFT",
                   on=exp.and_(exp.EQ(this=sql.col("term_index", "d"), expression=sql.col("term_index", "t")),
                               exp.EQ(this=sql.col("class_index", "d"), expression=sql.col("class_index", "c")))))
    marginal = exp.Window(this=exp.Sum(this=exp.Mul(this=sql.col("pi"), expression=sql.col("theta"))),
                          partition_by=[sql.col("term_index")])
    return exp.select(exp.Star(), exp.alias_(marginal, "theta_j", quoted=True)).from_(_sub(cells, "cells"))


def _mi_part() -> exp.Expression:
    """π_c [θ ln(θ/θ_j) + (1−θ) ln((1−θ)/(1−θ_j))], with 0·ln 0 = 0."""
    one = sql.dbl(1.0)
    th, tj, pi = sql.col("theta"), sql.col("theta_j"), sql.col("pi")
    present = exp.Case(ifs=[exp.If(this=exp.GT(this=th.copy(), expression=sql.dbl(0.0)),
                                   true=exp.Mul(this=th.copy(), expression=exp.Ln(this=exp.Div(this=th.copy(), expression=tj.copy()))))],
                       default=sql.dbl(0.0))
    not_th = sql.paren(exp.Sub(this=one.copy(), expression=th.copy()))
    not_tj = sql.paren(exp.Sub(this=one.copy(), expression=tj.copy()))
    absent = exp.Case(ifs=[exp.If(this=exp.LT(this=th.copy(), expression=one.copy()),
                                  true=exp.Mul(this=not_th, expression=exp.Ln(this=exp.Div(this=not_th.copy(), expression=not_tj))))],
                      default=sql.dbl(0.0))
    return exp.Mul(this=pi, expression=sql.paren(exp.Add(this=present, expression=absent)))


def mutual_information(model: Any, feature: str | None = None, con=None):
    """Mutual information (nats) between each vocabulary term's presence and the class.

    ``I(X_j; Y) = Σ_c [θ_jc π_c ln(θ_jc/θ_j) + (1−θ_jc) π_c ln((1−θ_jc)/(1−θ_j))]`` with
    ``θ_jc`` the share of class-c documents holding term j, ``π_c`` the class share of
    documents and ``θ_j = Σ_c π_c θ_jc`` (seeds/000, "Feature selection"): the 2 × K
    table's mutual information, computed from the stored statistics (weighted when the
    fit was) by :func:`sqlnb.models.naive_bayes.information.presence_mi`; ``con`` is
    no longer needed (kept for callers that pass it).

    Parameters
    ----------
    model : NaiveBayes or Bag
    feature : str, optional
        The bag (default: the model's first).
    con : DuckDB connection, optional

    Returns
    -------
    pyarrow.Table
        ``term``, ``mi``, most informative first (ties: term order).
    """
    import pyarrow as pa
    from sqlnb.models.naive_bayes.information import presence_mi

    bag, _ = _stats_of(model, feature)
    mi = presence_mi(bag.docs, bag.n)
    order = sorted(range(len(bag.terms)), key=lambda j: (-mi[j], bag.terms[j]))
    return pa.table({"term": pa.array([bag.terms[j] for j in order], pa.string()),
                     "mi": pa.array(mi[order] if order else [], pa.float64())})


def top_terms(model: Any, feature: str | None = None, n: int = 10, con=None):
    """The ``n`` terms that most indicate each class (for ``sqlnb show``).

    A term indicates class c when its document share there exceeds the overall one
    (θ_jc > θ_j); such terms are ranked by class c's part of the mutual information,
    ``π_c [θ_jc ln(θ_jc/θ_j) + (1−θ_jc) ln((1−θ_jc)/(1−θ_j))]``.

    Returns
    -------
    pyarrow.Table
        ``class`` (label), ``rank`` (1 = strongest), ``term``, ``mi_part``, ``doc_share``
        (θ_jc) and ``overall_share`` (θ_j).
    """
    import pyarrow as pa

    bag, classes = _stats_of(model, feature)
    con = _duckdb(con) if con is not None else new_connection()
    with _registered(con, bag) as names:
        part = _mi_part()
        rank = exp.Window(this=exp.RowNumber(), partition_by=[sql.col("class_index")],
                          order=exp.Order(expressions=[exp.Ordered(this=part.copy(), desc=True),
                                                       exp.Ordered(this=sql.col("term"))]))
        inner = (exp.select(sql.col("class_index"), exp.alias_(rank, "rank", quoted=True), sql.col("term"),
                            exp.alias_(part, "mi_part", quoted=True), exp.alias_(sql.col("theta"), "doc_share", quoted=True),
                            exp.alias_(sql.col("theta_j"), "overall_share", quoted=True))
                 .from_(_sub(_cells_query(names), "cells"))
                 .where(exp.GT(this=sql.col("theta"), expression=sql.col("theta_j"))))
        q = (exp.select(exp.Star()).from_(_sub(inner, "ranked"))
             .where(exp.LTE(this=sql.col("rank"), expression=exp.Literal.number(int(n))))
             .order_by(sql.col("class_index"), sql.col("rank")))
        t = con.sql(sql.render(q)).to_arrow_table()
    labels = [classes[i] for i in t["class_index"].to_pylist()]
    return pa.table({"class": labels, **{c: t[c] for c in ("rank", "term", "mi_part", "doc_share", "overall_share")}})
