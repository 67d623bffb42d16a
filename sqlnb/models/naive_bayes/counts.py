"""The per-(class, value) counts of categorical columns off DuckDB's ``histogram()``.

Weighted data (DuckDB has no weighted histogram) and every other engine count
categorical columns by one ``GROUPING SETS ((label, c_0), (label, c_1), …)`` query
(:func:`weighted_counts_query`). Engines bound the size of that statement, so past a
dialect's limit (:func:`count_blocks`) the columns are cut into blocks, one statement
each, every statement naming its columns by their place among all of them (``v<j>``,
``g<j>``):

* Spark refuses GROUPING SETS over more than :data:`SPARK_GROUPING_COLUMNS` columns
  (GROUPING_SIZE_LIMIT_EXCEEDED; the label and a cross-validation fold count);
* PostgreSQL refuses a SELECT of more than :data:`POSTGRES_TARGET_ENTRIES` columns ("target
  lists can have at most 1664 entries"): ``k``, ``v<j>``, ``g<j>`` per column and ``n``;
* SQLite (no GROUPING SETS: one SELECT per column glued by ``UNION ALL``, in the export)
  refuses more than :data:`SQLITE_COMPOUND_SELECTS` SELECTs in one statement.

Each column is counted in exactly one statement, over the same rows, so the counts (and
everything derived from them) are those of the one statement. DuckDB, and every engine
under its limit, keeps the one statement; DuckDB counts more than :data:`DUCKDB_HISTOGRAMS`
categorical columns this way too, in blocks of :data:`DUCKDB_GROUPING_SETS`.
"""

from __future__ import annotations

from typing import Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.source import Source

#: Spark refuses GROUPING SETS over more columns (GROUPING_SIZE_LIMIT_EXCEEDED; k and the
#: fold count): past it the counts, and TAN's pair scan
#: (:func:`~sqlnb.models.naive_bayes.tan.pair_statements`), take more than one statement.
SPARK_GROUPING_COLUMNS = 64
#: DuckDB plans a statement of many ``histogram()`` aggregates in time and memory that grow
#: much faster than their number (planning alone, 12 rows x 2 classes: 100 columns 0.9 s and
#: 0.4 GB, 200 columns 10-12 s and 1.4 GB; benchmarks/README.md): past this many
#: categorical columns a DuckDB fit counts them by GROUPING SETS instead (:func:`uses_histogram`) ...
DUCKDB_HISTOGRAMS = 48
#: ... in blocks of this many columns a statement (200 columns, 1M rows: 2.2 s and 1.5 GB in
#: blocks of 32, 2.5 s and 1.8 GB in blocks of 64; one statement of 300 weighted columns
#: passed 3 GB).
DUCKDB_GROUPING_SETS = 32
#: PostgreSQL's most columns in one SELECT ("target lists can have at most 1664 entries").
POSTGRES_TARGET_ENTRIES = 1664
#: SQLite's default ``SQLITE_MAX_COMPOUND_SELECT``: the most SELECTs one ``UNION ALL``
#: statement may glue (past it: "too many terms in compound SELECT").
SQLITE_COMPOUND_SELECTS = 500


def column_blocks(F: int, size: int) -> list[range]:
    """``range(F)`` cut into consecutive blocks of at most ``size`` (none when F is 0)."""
    return [range(s, min(s + size, F)) for s in range(0, F, size)] if F else []


def count_blocks(F: int, dialect: str, keys: int = 1, more: int = 1) -> list[range]:
    """The blocks of the ``F`` columns counted one statement each on ``dialect``
    (``keys``: the grouping columns every set has besides a feature, the label and, in
    cross-validation, the fold; ``more``: the columns a statement returns besides them and
    ``v<j>``, ``g<j>``, e.g. ``n``): one block unless a statement of all of them is past the
    dialect's limit (module docstring). Also the split of the binned columns' value counts
    (:func:`sqlnb.models.naive_bayes.fit.cut_counts`)."""
    most = {"duckdb": DUCKDB_GROUPING_SETS,
            "spark": SPARK_GROUPING_COLUMNS - keys,
            "postgres": (POSTGRES_TARGET_ENTRIES - keys - more) // 2,
            "sqlite": SQLITE_COMPOUND_SELECTS}.get(dialect, F)
    return column_blocks(F, max(most, 1))


def uses_histogram(dialect: str, features: Sequence[Feature]) -> bool:
    """Whether a fit on ``dialect`` counts the categorical ``features`` by ``histogram()``
    in its one statistics scan: on DuckDB (no other engine has it) with at most
    :data:`DUCKDB_HISTOGRAMS` of them; otherwise by :func:`weighted_counts_query`, one
    statement per :func:`count_blocks` block."""
    cats = sum(1 for f in features if f.kind == "categorical" and f.bag is None)
    return dialect == "duckdb" and cats <= DUCKDB_HISTOGRAMS


def weighted_counts_query(source: Source, label: str, weight: str | None, features: Sequence[Feature],
                          group: exp.Expression | None = None, columns: range | None = None) -> exp.Select:
    """(Weighted) per (class, value) counts of categorical columns: one GROUPING SETS query
    (``COUNT(*)`` when ``weight`` is None), columns ``k``, ``v<j>``, ``g<j>`` (``GROUPING``:
    0 on the rows counting column ``j``) per column, ``n``. ``group`` (e.g. a
    cross-validation fold) is one more key of every set, returned as the last column.
    ``columns``: only the features at these positions (a block of :func:`count_blocks`),
    still named by their position."""
    columns = range(len(features)) if columns is None else columns
    k = sql.col(label, "src")
    extra = [] if group is None else [group.copy()]
    sets = [exp.Tuple(expressions=[k.copy(), *[e.copy() for e in extra], sql.col(features[j].name, "src")])
            for j in columns]
    cols = [exp.alias_(k.copy(), "k", quoted=True)]
    for j in columns:
        x = sql.col(features[j].name, "src")
        cols += [exp.alias_(x, f"v{j}", quoted=True),
                 exp.alias_(exp.Grouping(expressions=[x.copy()]), f"g{j}", quoted=True)]
    n = exp.Sum(this=sql.as_double(sql.col(weight, "src"))) if weight else exp.Count(this=exp.Star())
    cols.append(exp.alias_(n, "n", quoted=True))
    cols += [exp.alias_(e, "g", quoted=True) for e in extra]
    return (
        exp.select(*cols)
        .from_(source.from_("src"))
        .where(exp.Not(this=exp.Is(this=k.copy(), expression=exp.Null())))
        .group_by(exp.GroupingSets(expressions=sets))
    )


def counts_rows(engine, source: Source, label: str, weight: str | None, features: Sequence[Feature],
                group: exp.Expression | None = None) -> list[tuple]:
    """The counts of :func:`weighted_counts_query` as rows ``(k, j, value, n[, group])``,
    ``j`` the column's position in ``features``: one statement per :func:`count_blocks`
    block on ``engine`` (an :class:`~sqlnb.engines.Engine`)."""
    out = []
    for block in count_blocks(len(features), engine.dialect, 1 if group is None else 2):
        for r in engine.execute(weighted_counts_query(source, label, weight, features, group, block)):
            # the one set the row belongs to: GROUPING(c_j) = 0
            i = next(i for i in range(len(block)) if r[2 + 2 * i] == 0)
            out.append((r[0], block[i], r[1 + 2 * i], *r[1 + 2 * len(block):]))
    return out
