"""The long layout: a token table of (document id, token[, count]) rows, with the labels
(fitting) or the documents (scoring) in a second table joined by id.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlnb import sql
from sqlnb.models.finish import scoring_select
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.models.naive_bayes.text.bags import BAG, _aggregate_columns, _where
from sqlnb.models.naive_bayes.text.params import bag_sums, parameter_table
from sqlnb.models.naive_bayes.text.tokens import _duckdb, _sub
from sqlnb.source import Query, resolve


def long_counts_query(tokens, labels, feature: Feature, label: str, weight: str | None) -> exp.Select:
    """``GROUP BY label, token`` over a long token table joined to its labels by id."""
    b = feature.bag
    t = _long_rows(tokens, feature)
    w = sql.as_double(sql.col(weight, "l")) if weight else None
    token = sql.col("token", "t")
    cols = _aggregate_columns(sql.col(label, "l"), sql.col("n", "t"), w, feature.threshold)
    cols.insert(1, exp.alias_(token.copy(), "token", quoted=True))
    return (exp.select(*cols).from_(t)
            .join(labels.from_("l"), on=exp.EQ(this=sql.col("id", "t"), expression=sql.col(b["id"], "l")))
            .where(_where(sql.col(label, "l"), token, feature))
            .group_by(sql.col(label, "l"), token.copy()))


def _long_rows(tokens, feature: Feature, alias: str = "t") -> exp.Subquery:
    """The token table as ``(id, token, n)`` aliased ``alias``. Without a count column every
    row is one occurrence: rows are counted per (id, token)."""
    b = feature.bag
    # Tokens are terms, compared as text at fit and at scoring alike: integer token ids
    # (a BIGINT column) are stored and looked up as their decimal text, so a model
    # fitted on ids scores ids, and its terms table keeps one type.
    token = exp.cast(sql.col(b["token"], "src"), "VARCHAR")
    if b.get("count"):
        sel = exp.select(exp.alias_(sql.col(b["id"], "src"), "id", quoted=True),
                         exp.alias_(token, "token", quoted=True),
                         exp.alias_(sql.col(b["count"], "src"), "n", quoted=True)).from_(tokens.from_("src"))
    else:
        sel = (exp.select(exp.alias_(sql.col(b["id"], "src"), "id", quoted=True),
                          exp.alias_(token, "token", quoted=True),
                          exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True))
               .from_(tokens.from_("src")).group_by(sql.col(b["id"], "src"), token.copy()))
    return _sub(sel, alias)


def long_scoring_query(model, tokens, docs, outputs, keep, con=None) -> exp.Select:
    """Score the documents of ``docs`` (a source with the id column) from ``tokens``.

    With ``con`` the parameter rows are a table registered there (:func:`parameter_table`);
    without, they are inlined and the SELECT is self-contained (export)."""
    (feature,) = [f for f in model.features if f.bag is not None]
    b = feature.bag
    params = model.log_parameters()[feature.name]
    table = parameter_table(con, params) if con is not None else None
    summed = bag_sums(feature, params, (_long_rows(tokens, feature, "u"), True), group=sql.col("id", "u"),
                      table=table)
    alias = BAG.alias(feature)
    join = exp.Join(this=_sub(summed, alias), side="LEFT",
                    on=exp.EQ(this=sql.col(b["id"], "src"), expression=sql.col("id", alias)))
    if keep is not None:
        docs.require(keep, "column to keep")
    # The grouped sums are joined to the documents: number them and sort at the end, so
    # the documents come back in their source's order (scoring_select's keep_order).
    return scoring_select(docs.from_("src"), model.class_scores(), model.classes, model.label_type,
                          list(docs.columns), outputs, keep, joins=[join], keep_order=True, decision=model.decision)


def first_token_docs(tokens, feature: Feature) -> Query:
    """The distinct document ids of a token table, in the order of each document's first
    token row (the default document table of :meth:`NaiveBayes.score_long`): ``GROUP BY``
    alone returns groups in no fixed order."""
    key, first = sql.col(feature.bag["id"], "src"), sql.col("sqlnb_first", "src")
    numbered = exp.select(key.copy(), exp.alias_(exp.Window(this=exp.RowNumber()), "sqlnb_first", quoted=True)
                          ).from_(tokens.from_("src"))
    return Query(sql.render(exp.select(key).from_(exp.Subquery(this=numbered, alias=exp.TableAlias(
        this=sql.ident("src")))).group_by(key.copy()).order_by(exp.Min(this=first))))


def resolve_long(con, data: Any, feature: Feature, docs: bool = False):
    """Resolve a token table (or, with ``docs``, a document table) for a long bag."""
    src = resolve(data, _duckdb(con))
    b = feature.bag
    need = [b["id"]] if docs else [b["id"], b["token"]] + ([b["count"]] if b.get("count") else [])
    src.require(need, "document table column" if docs else "token table column")
    return src
