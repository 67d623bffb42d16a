"""Screening's reads of the first rows, with and without DuckDB's late materialization.

DuckDB 2.0 plans ``SELECT ... FROM (SELECT ... FROM src LIMIT 100000)`` as a semi-join of
the source's row numbers under the limit with a second scan of the source.
:meth:`sqlnb.engines.DuckDBEngine.first_rows` turns that rewrite off for screening's
statements. This script times what a fit's first statements cost on a fresh
connection, as in a ``sqlnb fit`` process: screening (:func:`sqlnb.models.screening.screen`
over every column but the label, as the automatic plan has it), then the Gaussian shift
read where the data has DOUBLE columns, with the rewrite off (sqlnb now) and on (as
before), alternating, medians of ``--repeat``; on each ``fit_floor.py`` data set (Parquet)
and on the same rows as a DuckDB table (``--table``).

Example
-------
python benchmarks/first_rows.py --rows 10000000 --repeat 7 --data-dir /tmp/floor/data
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fit_floor  # noqa: E402


def _time_first_statements(source_text: str, label: str, table_db: str | None, rewrite: bool) -> tuple[float, float]:
    """(screening seconds, shift read seconds) on a fresh connection."""
    import duckdb

    import sqlnb
    from sqlnb.engines import DuckDBEngine
    from sqlnb.models import screening
    from sqlnb.models.naive_bayes.fit import gaussian_shifts, planned_kinds
    from sqlnb.models.naive_bayes.families.base import Feature

    con = duckdb.connect(table_db) if table_db else duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    engine = DuckDBEngine(con)
    if rewrite:  # DuckDB's rewrite left on: the hook does nothing
        engine.first_rows = contextlib.nullcontext
    source = engine.resolve(sqlnb.Table("t") if table_db else source_text)
    columns = [c for c in source.columns if c != label]
    t0 = time.perf_counter()
    screening.screen(engine, source, columns)
    t1 = time.perf_counter()
    kinds = planned_kinds(source, columns, "auto", None, None)
    gauss = [Feature(name=c, kind="gaussian", sql_type=source.columns[c]) for c, k in kinds.items() if k == "gaussian"]
    if gauss:
        gaussian_shifts(engine, source, gauss)
    t2 = time.perf_counter()
    con.close()
    return t1 - t0, t2 - t1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--no-table", action="store_true", help="Parquet files only")
    args = ap.parse_args(argv)
    import duckdb

    metas = fit_floor.datasets(args.rows, args.data_dir)
    print(f"`python benchmarks/first_rows.py {' '.join(argv if argv is not None else sys.argv[1:])}`; "
          f"{args.rows:,} rows; medians of {args.repeat}; load before {fit_floor._load()}\n")
    print("| data | source | screening, rewrite on (before) | screening, off (now) | shift read after it, before | now |")
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, meta in metas.items():
            sources = [("Parquet", None)]
            if not args.no_table:
                db = str(Path(tmp) / f"{name}.duckdb")
                con = duckdb.connect(db)
                con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{meta['globs']['data']}')")
                con.close()
                sources.append(("DuckDB table", db))
            for kind, db in sources:
                got: dict[bool, list] = {True: [], False: []}
                for r in range(args.repeat + 1):
                    for rewrite in (True, False):
                        t = _time_first_statements(meta["globs"]["data"], meta["label"], db, rewrite)
                        if r:  # round 0 warms the page cache
                            got[rewrite].append(t)
                med = {k: [statistics.median(x[i] for x in v) for i in (0, 1)] for k, v in got.items()}
                print(f"| {name} | {kind} | {med[True][0]:.4f} | {med[False][0]:.4f} | {med[True][1]:.4f} | "
                      f"{med[False][1]:.4f} |", flush=True)
    print(f"\nload after {fit_floor._load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
