"""Training under dbt against ``sqlnb fit`` on the same engine: the wall time of a whole
``dbt run --full-refresh`` of the training package's models (statistics and parameters;
not the example scoring model) and of a whole ``sqlnb fit`` process over the same table,
each a process as a user runs it.

Data: ``generate.py``'s ``mixed`` shape (4 Gaussian + 4 categorical columns, 3 classes).
Models: naive Bayes, TAN and AODE with MDL bins (their pair counts; TAN's conditional
tables, AODE's ratio tables). DuckDB always; PostgreSQL with ``--dsn`` (the table is copied
there first, not timed); Spark with ``--engines spark`` (the table written into a local
warehouse's catalog first, not timed; ``sqlnb --engine spark`` and dbt-spark's session, both
on ``--master``, default ``local[2]``). The load average (1 minute) is taken before each fit
and each run.

    python benchmarks/dbt_train.py --rows 1000000 [--dsn "host=... port=... user=... dbname=..."] [--models tan aode]
    python benchmarks/dbt_train.py --rows 1000000 --engines spark
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the benchmarks' helpers, and this checkout's sqlnb
import generate  # noqa: E402
from run import write_readme  # noqa: E402
from sqlnb.engines.spark import catalog_settings  # noqa: E402

BIN = Path(sys.executable).parent
MODELS = {"naive": [], "tan": ["--structure", "tan", "--bins", "mdl"], "aode": ["--structure", "aode", "--bins", "mdl"]}


def _timed(args, cwd=None, env=None) -> float:
    t = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args))} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t


#: Spark in one process (the driver runs the tasks), the same for sqlnb and dbt-spark.
SPARK_MASTER = "local[2]"


def _profiles(project: Path, profile: str, dsn: str | None, wh: Path, warehouse: Path | None = None) -> None:
    if warehouse is not None:
        out = {"type": "spark", "method": "session", "host": "NA", "schema": "default", "threads": 1,
               "server_side_parameters": {**catalog_settings(str(warehouse)), "spark.master": SPARK_MASTER,
                                          "spark.ui.enabled": "false"}}
    elif dsn is None:
        out = {"type": "duckdb", "path": str(wh), "threads": 1}
    else:
        parts = dict(p.split("=", 1) for p in dsn.split())
        out = {"type": "postgres", "host": parts["host"], "port": int(parts["port"]), "user": parts["user"],
               "password": "", "dbname": parts["dbname"], "schema": "public", "threads": 1}
    (project / "profiles.yml").write_text(json.dumps({profile: {"target": "t", "outputs": {"t": out}}}))


def run_engine(engine: str, wh: Path, dsn: str | None, tmp: Path, repeat: int, models: list,
               warehouse: Path | None = None) -> list[tuple]:
    """Per model: (engine, model, median fit s, median dbt s, load before the fits, load before the runs)."""
    sqlnb = [str(BIN / "sqlnb")] + (["--engine", "postgres", "--dsn", dsn] if dsn else [])
    if warehouse is not None:
        sqlnb = [str(BIN / "sqlnb"), "--engine", "spark", "--master", SPARK_MASTER, "--warehouse", str(warehouse)]
    where = (lambda t: t) if dsn or warehouse is not None else (lambda t: f"{wh}:{t}")
    env = dict(os.environ, DBT_SEND_ANONYMOUS_USAGE_STATS="false", DO_NOT_TRACK="1")
    rows = []
    for name in models:
        extra = MODELS[name]
        fit_load = os.getloadavg()[0]
        fits = [_timed([*sqlnb, "fit", where("train"), "--label", "label", "--model", where(name), "--replace", *extra])
                for _ in range(repeat)]
        project = tmp / f"{engine}_{name}"
        # the package is generated from the model as DuckDB stores it (the same model; fitted there, untimed)
        if dsn or warehouse is not None:
            _timed([str(BIN / "sqlnb"), "fit", f"{wh}:train", "--label", "label", "--model", f"{wh}:{name}",
                    "--replace", *extra])
        _timed([str(BIN / "sqlnb"), "dbt", "--model", f"{wh}:{name}", "--out", project, "--project", "--table",
                "train", "--train"])
        _profiles(project, f"sqlnb_{name}_example", dsn, wh, warehouse)
        vars_ = json.dumps({f"sqlnb_{name}_train_table": "train"})
        run_load = os.getloadavg()[0]
        runs = [_timed([str(BIN / "dbt"), "run", "--profiles-dir", ".", "--vars", vars_, "--full-refresh",
                        "--select", f"package:sqlnb_{name}", "--exclude", f"{name}_scored"], cwd=project, env=env)
                for _ in range(repeat)]
        rows.append((engine, name, statistics.median(fits), statistics.median(runs), fit_load, run_load))
        print(f"{engine} {name}: fit {rows[-1][2]:.1f} s, dbt run {rows[-1][3]:.1f} s", file=sys.stderr, flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dsn", help="a PostgreSQL server to run on as well")
    ap.add_argument("--engines", nargs="+", choices=["duckdb", "postgres", "spark"], default=["duckdb", "postgres"],
                    help="the engines to run on (postgres needs --dsn)")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--data", help="directory for the generated data (kept between runs)")
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp())
    out = Path(args.data or tmp) / f"mixed_{args.rows}"
    glob = generate.load_or_generate("mixed", args.rows, 8, 3, out)["globs"]["data"]
    wh = tmp / "wh.duckdb"
    con = duckdb.connect(str(wh))
    con.execute(f"CREATE TABLE train AS SELECT * FROM read_parquet('{glob}')")
    con.close()
    load0 = os.getloadavg()[0]
    rows = run_engine("duckdb", wh, None, tmp, args.repeat, args.models) if "duckdb" in args.engines else []
    if args.dsn and "postgres" in args.engines:
        import psycopg
        con = duckdb.connect(str(wh), read_only=True)
        table = con.sql("SELECT * FROM train").to_arrow_table()
        con.close()
        with psycopg.connect(args.dsn, autocommit=True) as c:
            c.execute("DROP TABLE IF EXISTS train")
        _copy_to_postgres(args.dsn, table)
        rows += run_engine("postgres", wh, args.dsn, tmp, args.repeat, args.models)
    if "spark" in args.engines:
        warehouse = tmp / "warehouse"
        _load_into_spark(glob, warehouse)
        rows += run_engine("spark", wh, None, tmp, args.repeat, args.models, warehouse)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    lines = [f"Training on {args.rows:,} rows (mixed: 4 Gaussian + 4 categorical columns, 3 classes), whole processes, "
             f"median of {args.repeat}, commit {commit}, load {load0:.1f}-{os.getloadavg()[0]:.1f} "
             f"(`python benchmarks/dbt_train.py --rows {args.rows} --repeat {args.repeat}"
             f"{' --dsn ...' if args.dsn else ''}{' --engines ' + ' '.join(args.engines) if 'spark' in args.engines else ''}`):", "",
             "| engine | model | `sqlnb fit` s (load) | `dbt run --full-refresh` s (load) | ÷ fit |",
             "|---|---|---|---|---|"]
    lines += [f"| {e} | {m} | {f:.1f} ({fl:.1f}) | {d:.1f} ({dl:.1f}) | {d / f:.1f}× |" for e, m, f, d, fl, dl in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_readme:
        write_readme(text, "dbt-train")
    return 0


def _load_into_spark(glob: str, warehouse: Path) -> None:
    """The parquet files as the table ``train`` of the warehouse's catalog (a process of its
    own: one JVM at a time holds the Derby catalog)."""
    code = ("import sys; from sqlnb.engines import SparkEngine; "
            "e = SparkEngine.start(master=sys.argv[3], warehouse=sys.argv[2], quiet=True); e.open_catalog(); "
            "e.spark.read.parquet(sys.argv[1]).write.format('parquet').saveAsTable('train'); e.close()")
    _timed([sys.executable, "-c", code, glob, str(warehouse), SPARK_MASTER],
           env=dict(os.environ, PYTHONPATH=str(HERE.parent)))


def _copy_to_postgres(dsn: str, table) -> None:
    """``CREATE TABLE train`` on the server and ``COPY`` the rows in."""
    import psycopg
    types = {"double": "DOUBLE PRECISION", "int64": "BIGINT", "int32": "INTEGER", "string": "TEXT",
             "large_string": "TEXT", "bool": "BOOLEAN"}
    cols = ", ".join(f'"{f.name}" {types[str(f.type)]}' for f in table.schema)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"CREATE TABLE train ({cols})")
        with c.cursor().copy("COPY train FROM STDIN") as copy:
            for row in zip(*[table.column(i).to_pylist() for i in range(table.num_columns)]):
                copy.write_row(row)


if __name__ == "__main__":
    sys.exit(main())
