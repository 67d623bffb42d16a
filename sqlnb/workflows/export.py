"""SQL to take elsewhere: the training queries per dialect, and DuckDB scoring macros.

:func:`fit_sql` renders the training aggregations (the statistics scan, outside DuckDB
the categorical counts, and a tree-augmented model's pair counts) for a dialect, so a warehouse sqlnb has no engine for can
compute the sufficient statistics itself. Dialect gaps are met by choosing another
builder, never by editing text:

* ``histogram()`` is DuckDB's own: elsewhere categorical columns are counted by one
  ``GROUPING SETS`` query (:func:`sqlnb.models.naive_bayes.counts.weighted_counts_query`),
  split as ``sqlnb fit`` splits it past the dialect's limit (on Spark 63 columns, on
  PostgreSQL 831, in SQLite 500, in DuckDB, which counts past 48 categorical columns this way
  too, 32: :func:`~sqlnb.models.naive_bayes.counts.count_blocks`).
* SQLite has no ``VAR_POP``: the class mean comes from a window
  (``AVG(x) OVER (PARTITION BY label)``) in a subquery and the variance is
  ``AVG((x − mean)²)`` — the same two-pass, cancellation-free form.
* SQLite has no ``GROUPING SETS``: one ``GROUP BY (label, column)`` per categorical
  column (one ``GROUP BY (label, a, b)`` per pair of tree features), glued with
  ``UNION ALL``, with the same output columns.

The pair counts are split into statements as ``sqlnb fit`` splits them off DuckDB
(:func:`~sqlnb.models.naive_bayes.tan.pair_statements`, at most
:data:`~sqlnb.models.naive_bayes.tan.SETS_PER_STATEMENT` pairs each; in SQLite at most
:data:`SQLITE_COMPOUND_SELECTS`), every statement with the columns of the whole scan.

What no static statement holds (cut points, a weighted Gaussian second pass, token
counts) is listed by :func:`fit_notes`, which ``sqlnb sql --fit`` prints on stderr.

:func:`duckdb_macro` wraps a model's scoring SELECT in a DuckDB table macro,
``CREATE MACRO "score_<name>"(tbl) AS TABLE ... FROM query_table(tbl) AS src``, so an
analyst scores any table or view with ``SELECT * FROM "score_<name>"('new_rows')``. A
generic macro over the saved parameter tables is not possible: a macro cannot unpivot a
table whose columns it does not know, and the scoring terms depend on each column's family.
"""

from __future__ import annotations

from typing import Any, Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.models.naive_bayes.counts import (SQLITE_COMPOUND_SELECTS, count_blocks, uses_histogram,
                                             weighted_counts_query)
from sqlnb.models.naive_bayes.fit import statistics_query
from sqlnb.models.naive_bayes import tan
from sqlnb.source import Source, Table


def _unbound(source: Any, features: Sequence[Feature], label: str, weight: str | None) -> Source:
    """A :class:`Source` for a table name or query without a connection (the builders
    only need the FROM item and the label's presence)."""
    if isinstance(source, Source):
        return source
    spec = Table(source) if isinstance(source, str) else source
    if not isinstance(spec, Table):
        raise SqlnbError("fit_sql takes a table name or a resolved Source")
    cols = {f.name: f.sql_type for f in features}
    cols[label] = "VARCHAR"
    if weight:
        cols[weight] = "DOUBLE"
    return Source(sql.table(spec.name, spec.schema, spec.catalog), cols, f"table {str(spec)!r}")


def _without_var_pop(q: exp.Select, label: str) -> exp.Select:
    """Replace every ``VAR_POP(x)`` by ``AVG((x − m)·(x − m))`` with ``m`` the window
    mean of ``x`` in its class, computed in a subquery over the source."""
    means: list[exp.Expression] = []

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.VariancePop):
            name = f"sqlnb_mean_{len(means)}"
            means.append(exp.alias_(exp.Window(this=exp.Avg(this=node.this.copy()),
                                               partition_by=[sql.col(label, "src")]), name, quoted=True))
            d = exp.Sub(this=node.this.copy(), expression=sql.col(name, "src"))
            return exp.Avg(this=exp.Mul(this=sql.paren(d), expression=sql.paren(d.copy())))
        return node

    out = q.transform(swap)
    if not means:
        return out
    from_item = out.args["from_"].this
    inner = exp.select(exp.Column(this=exp.Star(), table=sql.ident("src")), *means).from_(from_item.copy())
    out.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("src")))))
    return out


def _counts_union(source: Source, label: str, weight: str | None, cats: Sequence[Feature],
                  columns: range) -> exp.Expression:
    """:func:`weighted_counts_query` of the block ``columns`` without GROUPING SETS: one
    GROUP BY per column."""
    n = exp.Sum(this=sql.as_double(sql.col(weight, "src"))) if weight else exp.Count(this=exp.Star())
    parts = []
    for j in columns:
        cols = [exp.alias_(sql.col(label, "src"), "k", quoted=True)]
        for i in columns:
            cols.append(exp.alias_(sql.col(cats[i].name, "src") if i == j else exp.null(), f"v{i}", quoted=True))
            cols.append(exp.alias_(exp.Literal.number(0 if i == j else 1), f"g{i}", quoted=True))
        cols.append(exp.alias_(n.copy(), "n", quoted=True))
        parts.append(exp.select(*cols).from_(source.from_("src"))
                     .where(exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null())))
                     .group_by(sql.col(label, "src"), sql.col(cats[j].name, "src")))
    out = parts[0]
    for p in parts[1:]:
        out = exp.Union(this=out, expression=p, distinct=False)
    return out


def _pairs_union(source: Source, label: str, weight: str | None, tree: Sequence[Feature],
                 pairs: Sequence[tuple[int, int]]) -> exp.Expression:
    """:func:`~sqlnb.models.naive_bayes.tan.pairs_query` of ``pairs`` without GROUPING SETS:
    that query of each pair alone (padded: it reads only the pair's two columns), its one
    grouping set a plain ``GROUP BY`` and so its ``GROUPING(x)`` flags 0, glued with
    ``UNION ALL`` (the same rows and columns)."""
    parts = []
    for pair in pairs:
        one = tan.pairs_query(source, label, weight, tree, pairs=[pair], pad=True).transform(
            lambda node: exp.Literal.number(0) if isinstance(node, exp.Grouping) else node, copy=False)
        (keys,) = one.args["group"].expressions[0].expressions
        parts.append(one.group_by(*keys.expressions, append=False, copy=False))
    out = parts[0]
    for p in parts[1:]:
        out = exp.Union(this=out, expression=p, distinct=False)
    return out


def fit_queries(source: Any, label: str, features: Sequence[Feature], dialect: str,
                weight: str | None = None, pairs: Sequence[str] = ()) -> list[exp.Expression]:
    """The training statements for ``dialect`` as trees: the statistics scan, then (outside
    DuckDB, or when weighted) the categorical counts (one statement per
    :func:`~sqlnb.models.naive_bayes.counts.count_blocks` block), then (``pairs``: the tree features of
    a tree-augmented model, in the model's order) the pair counts of
    :func:`~sqlnb.models.naive_bayes.tan.pairs_query`, one statement per
    :func:`~sqlnb.models.naive_bayes.tan.pair_statements` chunk. The weighted Gaussian second pass
    needs the class means from the first result, so it is not part of a static export
    (:func:`fit_notes` says so)."""
    src = _unbound(source, features, label, weight)
    histogram = uses_histogram(dialect, features)
    stats = statistics_query(src, label, weight, features, histogram)
    if dialect in sql.NO_VAR_POP:
        stats = _without_var_pop(stats, label)
    out: list[exp.Expression] = [stats]
    # As collect_statistics: counts by GROUPING SETS when weighted or without histogram().
    cats = [f for f in features if f.kind == "categorical"] if (weight or not histogram) else []
    for block in count_blocks(len(cats), dialect):  # as the fit splits them (past the dialect's limit)
        out.append(_counts_union(src, label, weight, cats, block) if dialect in sql.NO_GROUPING_SETS
                   else weighted_counts_query(src, label, weight, cats, columns=block))
    if pairs:
        by_name = {f.name: f for f in features}
        tree = [by_name[n] for n in pairs]
        union = dialect in sql.NO_GROUPING_SETS
        # The runtime's split (collect_pairs off DuckDB; Spark's column limit), within
        # SQLite's UNION ALL limit.
        per = min(tan.SETS_PER_STATEMENT, SQLITE_COMPOUND_SELECTS) if union else tan.SETS_PER_STATEMENT
        for chunk in tan.pair_statements(len(tree), per, dialect):
            out.append(_pairs_union(src, label, weight, tree, chunk) if union
                       else tan.pairs_query(src, label, weight, tree, pairs=chunk, pad=True))
    return out


def fit_notes(features: Sequence[Feature], weight: str | None = None) -> list[str]:
    """What :func:`fit_queries` cannot hold, one ``note:`` line each: the passes
    ``sqlnb fit`` runs besides its statements, whose results depend on another result
    (so no static SQL reproduces them on other rows).

    * binned columns: their cut points are the model's, written into the statements as
      numbers; finding them is a pass of its own (quantiles, or MDL on per-value counts
      in Python);
    * weighted Gaussian columns: the variance is a second pass about the class means
      of the first result;
    * token bags: their term counts are a ``GROUP BY label, token`` query per bag (with
      vocabulary pruning), run after the statistics scan, which gives only their document
      counts.
    """
    notes = []
    binned = [f for f in features if f.kind == "binned"]
    if binned:
        names = ", ".join(f"{f.name!r} ({f.bins})" for f in binned)
        notes.append(f"note: the cut points of binned column{'s' if len(binned) > 1 else ''} {names} are the model's, "
                     "written into the SQL as numbers; finding them on other rows is a pass of its own that "
                     "this SQL leaves out (sqlnb fit --bins)")
    gauss = [f.name for f in features if f.kind == "gaussian" and f.bag is None]
    if weight and gauss:
        notes.append(f"note: weighted Gaussian column{'s' if len(gauss) > 1 else ''} "
                     f"{', '.join(map(repr, gauss))}: the variances are a second pass about the class means of the "
                     "first statement's result, which this SQL leaves out (sqlnb fit runs it)")
    bags = [f.name for f in features if f.bag is not None]
    if bags:
        many = len(bags) > 1
        notes.append(f"note: token bag{'s' if many else ''} {', '.join(map(repr, bags))}: this SQL counts "
                     f"{'their' if many else 'its'} documents only; the per-term counts are a GROUP BY label, token "
                     "query per bag that sqlnb fit runs after it, which this SQL leaves out")
    return notes


def fit_sql(source: Any, label: str, features: Sequence[Feature], dialect: str = "duckdb",
            weight: str | None = None, pretty: bool = True, pairs: Sequence[str] = ()) -> str:
    """The training SQL for ``dialect``: statements separated by ``;``.

    Parameters
    ----------
    source : str or Table or Source
        The training table (a name, or a resolved source).
    label : str
        The label column.
    features : list of Feature
        The features and their families, e.g. ``model.features``.
    dialect : str
        One of :data:`sqlnb.sql.DIALECTS`.
    weight : str, optional
        A weight column.
    pairs : list of str, optional
        A tree-augmented model's tree features (``model.stats.pairs.features``): adds
        their pair counts (columns ``k``, ``v<j>``, ``g<j>`` per tree feature and ``n``;
        the rows with two ``g<j> = 0`` count that pair), in as many statements as
        ``sqlnb fit`` splits them into off DuckDB (two or more past 780 pairs, i.e. 40
        features; in SQLite past 500 pairs, 32 features), each with those columns.

    Returns
    -------
    str
        The statistics query (columns ``k``, ``rows``, then the families' aggregates
        ``a0, a1, ...`` in feature order) and, if there are categorical features outside
        DuckDB (or more than 48 in DuckDB), the counts query (``k``, then ``v<j>``, ``g<j>`` per categorical
        column — ``g<j> = 0`` marks the rows counting column ``j`` — and ``n``); past the
        dialect's limit (on Spark 63 categorical columns, on PostgreSQL 831, in SQLite
        500) one counts query per block of columns, each with its columns' ``v<j>``,
        ``g<j>`` (``j`` still the column's place among all categorical columns).
    """
    return ";\n\n".join(sql.render(q, dialect, pretty=pretty) for q in
                        fit_queries(source, label, features, dialect, weight, pairs)) + ";\n"


def duckdb_macro_tree(model, name: str, outputs: Sequence[str] = ("prediction", "proba")) -> exp.Create:
    """``CREATE OR REPLACE MACRO "score_<name>"(tbl) AS TABLE <scoring SELECT>`` as a tree."""
    src = exp.Table(this=exp.Anonymous(this="query_table", expressions=[exp.column("tbl")]),
                    alias=exp.TableAlias(this=sql.ident("src")))
    select = model.scoring_query(None, outputs, source_from=src)
    return exp.Create(
        this=exp.UserDefinedFunction(this=sql.table(f"score_{name}"), expressions=[exp.to_identifier("tbl")],
                                     wrapped=True),
        kind="MACRO", replace=True, expression=select,
        properties=exp.Properties(expressions=[exp.ReturnsProperty(this=exp.Schema(this=exp.Var(this="TABLE")),
                                                                   is_table=True)]),
    )


def duckdb_macro(model, name: str, outputs: Sequence[str] = ("prediction", "proba"), pretty: bool = True) -> str:
    """A DuckDB table macro scoring any table or view with ``model``.

    Examples
    --------
    >>> con.execute(duckdb_macro(model, "churn"))                      # doctest: +SKIP
    >>> con.sql("SELECT * FROM score_churn('new_rows')")               # doctest: +SKIP
    """
    return sql.render(duckdb_macro_tree(model, name, outputs), "duckdb", pretty=pretty) + ";\n"
