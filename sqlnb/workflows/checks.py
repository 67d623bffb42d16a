"""Checks of the data a model scores, said before the user reads the results.

:func:`unseen_categories` finds categorical columns whose values the model has mostly
never seen: adult.test spells its categories with a leading space (``' Male'``), and a
model fitted on adult.data then treats all eight categorical columns as missing — the
accuracy of the numeric columns alone, with exit 0. The check reads the first
``SAMPLE_ROWS`` rows only (one query, every categorical column at once), so it costs the
same whatever the size of the data. It runs on the engine that holds the data (DuckDB,
PostgreSQL, Spark), where a value is seen when it equals a training value, as the
engine's scoring join compares them; on Spark and PostgreSQL "the first rows" are
whichever the engine reads first.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.engines.base import first_rows
from sqlnb.models.naive_bayes.families import REGISTRY
from sqlnb.source import Source
from sqlnb.sql.types import is_float

#: Rows read from the start of the source.
SAMPLE_ROWS = 10_000
#: Share of unseen non-NULL values above which a column is reported.
THRESHOLD = 0.5


def _seen(feature, values: list, input_type: str, dialect: str) -> exp.Expression:
    """Whether the row's value is one of the training ``values``: in DuckDB by the
    position the in-place scoring looks up (a value read with the fitted type); elsewhere
    by equality with the value literals, the comparison the engines' scoring join makes."""
    if not values:
        return exp.false()
    if dialect == "duckdb":
        position = REGISTRY["categorical"].position(feature, values, input_type)
        return exp.Not(this=exp.Is(this=position, expression=exp.Null()))
    return exp.In(this=sql.col(feature.name, "src"), expressions=[sql.value(v, feature.sql_type) for v in values])


def _count_when(cond: exp.Expression) -> exp.Expression:
    """``COUNT(CASE WHEN cond THEN 1 END)``: the rows where ``cond`` holds, in any dialect."""
    return exp.Count(this=exp.Case(ifs=[exp.If(this=cond, true=exp.Literal.number(1))]))


def unseen_counts(model: Any, source: Source, con: Any, sample_rows: int = SAMPLE_ROWS) -> list[dict]:
    """Per categorical column of ``model`` in ``source``: in the first ``sample_rows``
    rows, how many non-NULL values there are (``values``) and how many of them the model
    never saw in training (``unseen``), with up to two unseen ``examples`` and the
    ``nearest`` seen value of each (by similarity of their text). One query, every
    categorical column at once, run by ``con`` (a DuckDB connection or an engine);
    models without categorical columns give an empty list."""
    features = [f for f in getattr(model, "features", []) if getattr(f, "kind", None) == "categorical"
                and f.bag is None and f.name in source.columns]
    if not features:
        return []
    engine = as_engine(con)
    values = {f.name: list(model.stats.features[f.name].values) for f in features}
    columns = []
    for j, f in enumerate(features):
        x = sql.col(f.name, "src")
        present = exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))
        if is_float(source.columns[f.name]):
            present = exp.Not(this=sql.paren(sql.missing(x.copy())))
        seen = _seen(f, values[f.name], source.columns[f.name], engine.dialect)
        unseen = exp.and_(present.copy(), exp.Not(this=seen))
        text = exp.Cast(this=x.copy(), to=exp.DataType.build("varchar"))
        columns += [
            exp.alias_(_count_when(present), f"n{j}", quoted=True),
            exp.alias_(_count_when(unseen.copy()), f"u{j}", quoted=True),
            exp.alias_(exp.Min(this=exp.Case(ifs=[exp.If(this=unseen.copy(), true=text)])), f"a{j}", quoted=True),
            exp.alias_(exp.Max(this=exp.Case(ifs=[exp.If(this=unseen.copy(), true=text.copy())])), f"b{j}",
                       quoted=True),
        ]
    head = exp.select(exp.Star()).from_(source.from_("src")).limit(sample_rows)
    query = exp.select(*columns).from_(exp.Subquery(this=head, alias=exp.TableAlias(this=sql.ident("src"))))
    with first_rows(engine):  # DuckDB: without late materialization (DuckDBEngine.first_rows)
        row = engine.execute(query)[0]
    out = []
    for j, f in enumerate(features):
        n, u, a, b = row[4 * j:4 * j + 4]
        examples = [v for v in dict.fromkeys([a, b]) if v is not None]
        known = _candidates(values[f.name], model.stats.features[f.name].counts, examples) if examples else []
        nearest = [m for e in examples for m in difflib.get_close_matches(e, known, n=1, cutoff=0.0)]
        out.append({"column": f.name, "values": int(n), "unseen": int(u), "examples": examples,
                    "nearest": list(dict.fromkeys(nearest)), "rows_read": sample_rows})
    return out


#: Seen values compared with an unseen one by text similarity (the most frequent ones, plus
#: any that differ from it only in case, spaces or a trailing '.'): difflib over a 100,000-value
#: vocabulary would take seconds.
NEAREST_MAX = 1_000


def _norm(text: str) -> str:
    return text.strip().rstrip(".").casefold()


def _candidates(values: list, counts: Any, examples: list[str]) -> list[str]:
    known = [str(v) for v in values]
    if len(known) <= NEAREST_MAX:
        return known
    frequency = np.asarray(counts, dtype=float).reshape(-1, len(known)).sum(axis=0)
    top = [known[i] for i in np.argsort(-frequency, kind="stable")[:NEAREST_MAX]]
    same = {_norm(e) for e in examples}
    return list(dict.fromkeys([k for k in known if _norm(k) in same] + top))


def unseen_categories(model: Any, source: Source, con: Any,
                      sample_rows: int = SAMPLE_ROWS, threshold: float = THRESHOLD,
                      counts: list[dict] | None = None) -> list[str]:
    """Lines for stderr about the values of categorical columns the model never saw, in
    the first ``sample_rows`` rows (:func:`unseen_counts`, or ``counts`` when given):

    * a ``warning:`` per column where more than ``threshold`` of the non-NULL values are
      unseen (a leading space, another spelling), naming the share, two unseen values and
      the nearest seen ones;
    * one ``note:`` counting the unseen values of the other columns that have any.
    """
    counts = unseen_counts(model, source, con, sample_rows) if counts is None else counts
    treated = "an unseen bucket" if getattr(getattr(model, "hyper", None), "unseen", "missing") == "bucket" \
        else "missing"
    lines, few = [], []
    for c in counts:
        n, u = c["values"], c["unseen"]
        if not n or not u:
            continue
        if u / n <= threshold:
            few.append(f"{c['column']} {u:,} of {n:,}")
            continue
        lines.append(
            f"warning: column {c['column']!r}: {u:,} of {n:,} non-NULL values in the first {sample_rows:,} rows "
            f"({100.0 * u / n:.0f}%) are unseen in training and score as {treated} "
            f"(e.g. {', '.join(repr(e) for e in c['examples'])}; nearest seen: "
            f"{', '.join(repr(m) for m in c['nearest']) or 'none'})")
    if few:
        lines.append(f"note: values unseen in training, in the first {sample_rows:,} rows (scored as {treated}): "
                     + "; ".join(few))
    return lines
