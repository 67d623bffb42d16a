"""Query shapes for categorical naive Bayes counts in DuckDB, against the bare scan.

Counts per (class, feature, level), unweighted and weighted, on a generated categorical data set
(default 10M rows x 8 VARCHAR columns with 3..50 levels x 3 classes, plus a weight column ``w``):

bare scan        ``bit_xor(hash(c))`` per column (``max(c)`` is answered from Parquet statistics)
histogram        ``SELECT label, histogram(c0), ..., histogram(c7) GROUP BY label``
grouping sets    ``GROUP BY GROUPING SETS ((label, c0), ..., (label, c7))`` with ``count(*)``
union all        one ``GROUP BY label, cj`` per column, ``UNION ALL``
unpivot          ``UNPIVOT`` the columns, then ``GROUP BY label, name, value``

and the weighted versions (``sum(w)`` instead of ``count(*)``): DuckDB 2.0 has no weighted
``histogram`` (its only arguments are the value and optional bin boundaries) and
``histogram(...) EXPORT_STATE`` is not implemented, so ``combine_aggr(state, multiplicity)``
cannot weight it either (and takes only BIGINT multiplicities). ``sum(w) FILTER (WHERE cj = v)``
per (column, level) is one pass but needs the levels first and is very slow (207 filtered
aggregates: ~20 s of CPU per 1M rows), so it runs only with ``--filter``, once.

Examples
--------
python benchmarks/categorical_stats.py --rows 10000000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import duckdb
from sqlglot import exp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402
import generate  # noqa: E402
from generate import col, parquet_table  # noqa: E402


def _count(weight: str | None) -> exp.Expression:
    return exp.func("sum", col(weight)) if weight else exp.Count(this=exp.Star())


def queries(glob: str, columns: list[str], label: str, weight: str | None, levels: dict | None = None) -> dict:
    """The candidate statements, rendered for DuckDB, keyed by a short name.

    Parameters
    ----------
    glob : str
        Parquet glob.
    columns : list of str
        Categorical columns.
    label : str
        Class column.
    weight : str or None
        Weight column; None for plain counts.
    levels : dict, optional
        ``{column: n_levels}`` with levels ``'v0' ..``; adds the weighted ``FILTER`` variant.
    """
    src = parquet_table(glob)
    lab = col(label)
    touch = [exp.Anonymous(this="bit_xor", expressions=[exp.Anonymous(this="hash", expressions=[col(c)])]) for c in [*columns, label]]
    out = {"bare scan": exp.select(*touch, *([exp.func("sum", col(weight))] if weight else [])).from_(src)}
    if not weight:
        out["histogram"] = exp.select(lab, *[exp.alias_(exp.Anonymous(this="histogram", expressions=[col(c)]), c, quoted=True) for c in columns]).from_(src).group_by(lab)
    sets = exp.GroupingSets(expressions=[exp.Tuple(expressions=[lab, col(c)]) for c in columns])
    grouping = exp.Anonymous(this="grouping_id", expressions=[col(c) for c in columns])
    out["grouping sets"] = exp.select(grouping, lab, *[col(c) for c in columns], exp.alias_(_count(weight), "n", quoted=True)).from_(src).group_by(sets)
    parts = [
        exp.select(exp.alias_(exp.Literal.string(c), "feature", quoted=True), lab, exp.alias_(col(c), "value", quoted=True), exp.alias_(_count(weight), "n", quoted=True)).from_(src).group_by(lab, col(c))
        for c in columns
    ]
    union = parts[0]
    for p in parts[1:]:
        union = exp.union(union, p, distinct=False)
    out["union all"] = union
    unpivot = exp.Pivot(
        this=src.copy(),
        expressions=[col(c) for c in columns],
        using=False,
        unpivot=True,
        into=exp.UnpivotColumns(this=col("feature"), expressions=[col("value")]),
    )
    agg = exp.select(col("feature"), lab, col("value"), exp.alias_(_count(weight), "n", quoted=True)).from_(exp.Subquery(this=unpivot, alias=exp.TableAlias(this=exp.to_identifier("u"))))
    out["unpivot"] = agg.group_by(col("feature"), lab, col("value"))
    if weight and levels:
        filt = [
            exp.Filter(this=exp.func("sum", col(weight)), expression=exp.Where(this=col(c).eq(exp.Literal.string(f"v{v}"))))
            for c in columns
            for v in range(levels[c])
        ]
        out[f"sum(w) FILTER per level ({len(filt)} aggregates)"] = exp.select(lab, *filt).from_(src).group_by(lab)
    return {k: q.sql("duckdb") for k, q in out.items()}


def main(argv=None) -> int:
    """Generate (or reuse) the data set, time every query, print a markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("Examples"):], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--filter", action="store_true", help="also time sum(w) FILTER per level (slow; once)")
    a = ap.parse_args(argv)
    out = a.data_dir / f"categorical-r{a.rows}-d{a.features}-k{a.classes}-s0-f1-w"
    meta = generate.load_or_generate("categorical", a.rows, a.features, a.classes, out, weights=True)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    print(f"{a.rows:,} rows x {a.features} VARCHAR columns x {a.classes} classes, {meta['bytes'] / 2**20:.1f} MiB; wall seconds, median / min of {a.repeat}; load average {os.getloadavg()[0]:.1f} at start\n")
    print("| counts | query | median | min | CPU (median) | result rows |\n|---|---|---:|---:|---:|---:|")
    for weight in (None, meta["weight"]):
        levels = meta["levels"] if a.filter else None
        for name, sql in queries(meta["globs"]["data"], meta["categorical"], meta["label"], weight, levels).items():
            stats, rows = baselines.timed(lambda: con.execute(sql).fetchall(), 1 if "FILTER" in name else a.repeat)
            print(f"| {'sum(w)' if weight else 'count(*)'} | {name} | {stats['median']:.3f} | {stats['min']:.3f} | {stats['cpu']:.2f} | {len(rows)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
