"""Each naive Bayes family's fit against the floor: a bare scan of the same columns.

For every family, in fresh child processes (alternating, ``--repeat`` rounds):

* ``bare``: ``SELECT sum(x0), ..., sum(xd)`` over the columns the fit reads (``bit_xor(hash(c))``
  for VARCHAR columns, as in ``baselines.bare_scan``), no grouping;
* ``grouped``: the same aggregates ``GROUP BY label``, the least any per-class statistic costs;
* ``fit``: ``sqlnb.fit(glob, "label", kind=FAMILY)`` on a fresh connection (statistics query,
  Gaussian shift read, parameter derivation; not the import).

Data sets (``benchmarks/data/``, generated once by ``generate.py``): ``wide`` for Gaussian;
``counts``, the wide file's values mapped to non-negative counts ``floor(|x| * 2)``, for
Bernoulli, multinomial and complement; ``categorical`` (8 VARCHAR columns) for categorical; and
``mixed`` (8 DOUBLE + 8 VARCHAR) for the mixed model.

The aggregate audit (``--audit``) times single aggregate shapes over the 20 count columns
(``--audit-data wide``: the Gaussian data's columns), ``GROUP BY label``, in one process: what
each way of counting costs against ``SUM(x)``.

Whole processes (``--processes``): per family, alternating, ``--repeat`` rounds of four
child processes, each timed from its start to its exit: ``python -c`` importing DuckDB and
connecting (the bare scan's process start), the same running the bare scan, ``sqlnb fit --help``
(the fit's process start: it imports what a fit imports and does nothing) and ``sqlnb fit DATA
--label label --kind FAMILY --model TMP:NAME --replace`` (screening, shift read, statistics,
the model stored). The ratio is ``(fit − fit start) / (bare − bare start)``: each side's own
start subtracted, so what sqlnb imports beyond DuckDB (sqlglot, numpy, pyarrow, click: the
fit start is ~0.3 s more than the bare start) is left out, and whatever a fit imports after its
start (pandas, through pyarrow, in older versions) counts against it. The "all in" ratio
``(fit − bare start) / (bare − bare start)`` subtracts the bare start from both: what a user
waits for beyond Python and DuckDB. Children run with bytecode caches (``PYTHONDONTWRITEBYTECODE``
removed from their environment: an installed sqlnb has them; without them every process
compiled sqlnb's sources, ~0.2 s, more in the fit than in ``--help``), after one untimed round
that writes the caches and warms the page cache. Children run in a temporary directory: run
from a checkout, ``python -m sqlnb`` imported that checkout's sqlnb whatever ``PYTHONPATH``
said (the current directory comes first), so a "before" measured with ``PYTHONPATH=<old
checkout>`` from the new one measured the new code. ``uptime``'s load is printed before and after:
2 shared cores make single figures noisy, read the ratios.

Examples
--------
python benchmarks/fit_floor.py --rows 10000000 --repeat 3
python benchmarks/fit_floor.py --rows 10000000 --audit
python benchmarks/fit_floor.py --rows 10000000 --audit --audit-data wide
python benchmarks/fit_floor.py --rows 10000000 --processes --families gaussian --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402
import generate  # noqa: E402
from run import machine  # noqa: E402

#: family -> (data set, sqlnb.fit keyword arguments)
FAMILIES = {
    "gaussian": ("wide", {"kind": "gaussian"}),
    "bernoulli": ("counts", {"kind": "bernoulli"}),
    "multinomial": ("counts", {"kind": "multinomial"}),
    "complement": ("counts", {"kind": "complement"}),
    "categorical": ("categorical", {"kind": "categorical"}),
    "mixed": ("mixed", {}),
}

#: Aggregate shapes for ``--audit`` (DuckDB SQL over one column ``{c}``); the first is the floor.
AUDIT = {
    "SUM(x)": "SUM({c})",
    "COUNT(x)": "COUNT({c})",
    "MIN(x)": "MIN({c})",
    "COUNT(*) FILTER (WHERE x > 0)": "COUNT(*) FILTER (WHERE {c} > 0.0)",
    "COUNT_IF(x > 0)": "COUNT_IF({c} > 0.0)",
    "SUM(CASE WHEN x > 0 THEN 1 ELSE 0 END)": "SUM(CASE WHEN {c} > 0.0 THEN 1 ELSE 0 END)",
    "COUNT(x), SUM(x), MIN(x) (multinomial)": "COUNT({c}), SUM({c}), MIN({c})",
    "COUNT(x), SUM(x - K), SUM((x - K)^2) (Gaussian)": "COUNT({c}), SUM({c} - 1.5), SUM(({c} - 1.5) * ({c} - 1.5))",
    "COUNT(x), SUM(x), SUM(x^2) (Gaussian, K = 0)": "COUNT({c}), SUM({c}), SUM({c} * {c})",
    "COUNT(x), AVG(x), VAR_POP(x)": "COUNT({c}), AVG({c}), VAR_POP({c})",
}


def datasets(rows: int, data_dir: Path) -> dict:
    """``{name: meta}`` for the four data sets, generated on first use."""
    metas = {}
    for shape, (d, k) in {"wide": (20, 3), "categorical": (8, 3), "mixed": (16, 3)}.items():
        out = data_dir / f"{shape}-r{rows}-d{d}-k{k}-s0-f1"
        metas[shape] = baselines.isolated(generate.load_or_generate, shape, rows, d, k, out, False, seed=0, files=1)
    metas["counts"] = baselines.isolated(_counts, metas["wide"], data_dir / f"counts-r{rows}-d20-k3-s0-f1")
    return metas


def _counts(wide: dict, out: Path) -> dict:
    """The wide data's columns as non-negative counts ``floor(|x| * 2)`` (DOUBLE)."""
    import json

    import duckdb

    meta_path = out / "meta.json"
    if meta_path.exists():
        return json.loads(meta_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    from sqlglot import exp

    cols = [generate.col(wide["label"])] + [
        exp.alias_(exp.cast(exp.Floor(this=exp.Mul(this=exp.Abs(this=generate.col(c)), expression=exp.Literal.number(2))),
                            "DOUBLE"), c, quoted=True) for c in wide["numeric"]]
    query = exp.select(*cols).from_(generate.parquet_table(wide["globs"]["data"]))
    target = out / "part-00000.parquet"
    con.execute(f"COPY ({query.sql('duckdb')}) TO '{target}' (FORMAT parquet)")
    meta = dict(wide, shape="counts", globs={"data": str(out / "*.parquet")})
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def _bare(meta: dict, grouped: bool) -> float:
    import duckdb
    from sqlglot import exp

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    touch = [exp.Anonymous(this="bit_xor", expressions=[exp.Anonymous(this="hash", expressions=[generate.col(c)])])
             for c in meta["categorical"]]
    aggs = [exp.func("sum", generate.col(c)) for c in meta["numeric"]] + touch
    q = exp.select(*aggs).from_(generate.parquet_table(meta["globs"]["data"]))
    q = q.select(generate.col(meta["label"])).group_by(generate.col(meta["label"])) if grouped else \
        q.select(exp.Anonymous(this="bit_xor", expressions=[exp.Anonymous(this="hash", expressions=[generate.col(meta["label"])])]))
    t0 = time.perf_counter()
    con.execute(q.sql("duckdb")).fetchall()
    return time.perf_counter() - t0


def _fit(meta: dict, kwargs: dict) -> float:
    import duckdb

    import sqlnb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    t0 = time.perf_counter()
    sqlnb.fit(meta["globs"]["data"], meta["label"], con=con, screen=False, **kwargs)
    return time.perf_counter() - t0


def _bare_script(meta: dict, run: bool) -> str:
    """The ``python -c`` text of the bare scan's process (``run=False``: its start only)."""
    from sqlglot import exp

    q = exp.select(*[exp.func("sum", generate.col(c)) for c in meta["numeric"]],
                   *[exp.Anonymous(this="bit_xor", expressions=[exp.Anonymous(this="hash", expressions=[generate.col(c)])])
                     for c in meta["categorical"] + [meta["label"]]]).from_(generate.parquet_table(meta["globs"]["data"]))
    body = f"con.execute({q.sql('duckdb')!r}).fetchall()" if run else "pass"
    return f"import duckdb\ncon = duckdb.connect()\ncon.execute('SET enable_progress_bar = false')\n{body}\n"


def family_arguments(doc: str, argv=None) -> tuple[argparse.Namespace, dict, dict]:
    """(arguments, data set meta, fit keywords) of a one-family script (``fit_parts.py``,
    ``fit_minimum.py``): ``--rows``, ``--family``, ``--repeat``, ``--data-dir``; the data
    set generated on first use."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--family", choices=list(FAMILIES), default="gaussian")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    args = ap.parse_args(argv)
    data, kwargs = FAMILIES[args.family]
    return args, datasets(args.rows, args.data_dir)[data], kwargs


def _child_env() -> dict:
    """The children's environment: with bytecode caches (module docstring)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed_process(cmd: list[str], cwd: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, all threads) of one child process,
    run in ``cwd``: not in a checkout, whose ``sqlnb`` ``python -m sqlnb`` would import
    before the one on ``PYTHONPATH`` (the current directory comes first on ``sys.path``)."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(), cwd=cwd)
    took = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)[:200]} failed: {out.stderr[-2000:]}")
    return took, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def processes(metas: dict, families: list[str], repeat: int) -> dict:
    """``{family: {part: [(wall, cpu) seconds, ...]}}`` of whole processes (module docstring)."""
    py = sys.executable
    env_path = os.environ.get("PYTHONPATH")
    if env_path:  # say which sqlnb the children import
        where = subprocess.run([py, "-c", "import sqlnb; print(sqlnb.__file__)"], capture_output=True, text=True,
                               env=_child_env(), cwd=tempfile.gettempdir()).stdout.strip()
        print(f"children import {where}", file=sys.stderr)
    times: dict = {f: {"bare start": [], "bare": [], "fit start": [], "fit": []} for f in families}
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "models.duckdb")
        for r in range(repeat + 1):  # round 0 is not timed: bytecode caches written, files cached
            for fam in families:
                data, kwargs = FAMILIES[fam]
                meta = metas[data]
                fit = [py, "-m", "sqlnb", "fit", meta["globs"]["data"], "--label", meta["label"],
                       "--model", f"{store}:{fam}", "--replace"] + (["--kind", kwargs["kind"]] if "kind" in kwargs else [])
                got = {"bare start": _timed_process([py, "-c", _bare_script(meta, False)], tmp),
                       "bare": _timed_process([py, "-c", _bare_script(meta, True)], tmp),
                       "fit start": _timed_process([py, "-m", "sqlnb", "fit", "--help"], tmp),
                       "fit": _timed_process(fit, tmp)}
                if r == 0:
                    continue
                t = times[fam]
                for k, v in got.items():
                    t[k].append(v)
                print(f"{fam}: " + ", ".join(f"{k} {v[-1][0]:.3f} (cpu {v[-1][1]:.3f})" for k, v in t.items())
                      + f" (PYTHONPATH={env_path})", file=sys.stderr)
    return times


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def audit(meta: dict, repeat: int) -> list[tuple[str, float]]:
    """Median seconds of each :data:`AUDIT` shape over every count column, ``GROUP BY label``."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    src = f"read_parquet('{meta['globs']['data']}')"
    out = []
    for name, template in AUDIT.items():
        aggs = ", ".join(template.format(c=f'"{c}"') for c in meta["numeric"])
        q = f'SELECT "label", {aggs} FROM {src} GROUP BY "label"'
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            con.execute(q).fetchall()
            times.append(time.perf_counter() - t0)
        out.append((name, statistics.median(times)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--audit", action="store_true", help="time single aggregate shapes instead")
    ap.add_argument("--audit-data", choices=("counts", "wide"), default="counts", help="the audit's columns")
    ap.add_argument("--processes", action="store_true",
                    help="whole processes (sqlnb fit CLI against a bare scan), process start subtracted")
    args = ap.parse_args(argv)
    metas = datasets(args.rows, args.data_dir)
    info = machine()
    command = "python benchmarks/fit_floor.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"`{command}`; {info['cpu']}, {info['memory']}; {info['versions']}\n")
    if args.audit:
        rows = baselines.isolated(audit, metas[args.audit_data], args.repeat)
        floor = rows[0][1]
        print(f"{args.rows:,} rows x 20 {args.audit_data} columns x 3 classes, GROUP BY label, median of {args.repeat}\n")
        print("| aggregate per column | seconds | × SUM(x) |\n|---|---:|---:|")
        for name, s in rows:
            print(f"| `{name}` | {s:.3f} | {s / floor:.2f} |")
        return 0
    families = args.families.split(",")
    if args.processes:
        before = _load()
        times = processes(metas, families, args.repeat)
        print(f"{args.rows:,} rows, whole processes, wall seconds, median of {args.repeat} alternating rounds; "
              f"load before: {before}; after: {_load()}\n")
        print("Wall seconds, and in brackets CPU seconds (user + system, all threads; steadier under load).\n")
        print("| family | bare start | bare | fit start | fit | (fit − start) ÷ (bare − start) | CPU ratio | "
              "wall ratio per round | all in (wall, CPU) |")
        print("|---|---:|---:|---:|---:|---:|---:|---|---|")
        for fam in families:
            t = times[fam]
            m = {k: statistics.median(w for w, _ in v) for k, v in t.items()}
            c = {k: statistics.median(u for _, u in v) for k, v in t.items()}
            rounds = [(f[0] - fs[0]) / (b[0] - bs[0])
                      for bs, b, fs, f in zip(t["bare start"], t["bare"], t["fit start"], t["fit"])]
            cells = " | ".join(f"{m[k]:.3f} ({c[k]:.2f})" for k in ("bare start", "bare", "fit start", "fit"))
            print(f"| {fam} | {cells} | {(m['fit'] - m['fit start']) / (m['bare'] - m['bare start']):.2f}× | "
                  f"{(c['fit'] - c['fit start']) / (c['bare'] - c['bare start']):.2f}× | "
                  + ", ".join(f"{r:.2f}" for r in rounds)
                  + f" | {(m['fit'] - m['bare start']) / (m['bare'] - m['bare start']):.2f}×, "
                  f"{(c['fit'] - c['bare start']) / (c['bare'] - c['bare start']):.2f}× |")
        return 0
    times: dict = {f: {"bare": [], "grouped": [], "fit": []} for f in families}
    for _ in range(args.repeat):  # alternate: each round runs everything once
        for fam in families:
            data, kwargs = FAMILIES[fam]
            times[fam]["bare"].append(baselines.isolated(_bare, metas[data], False))
            times[fam]["grouped"].append(baselines.isolated(_bare, metas[data], True))
            times[fam]["fit"].append(baselines.isolated(_fit, metas[data], kwargs))
            print(f"{fam}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in times[fam].items()), file=sys.stderr)
    print(f"{args.rows:,} rows, wall seconds, median of {args.repeat} alternating rounds, each in a fresh process\n")
    print("| family | data | bare scan | GROUP BY label scan | sqlnb fit | fit ÷ bare | fit ÷ grouped |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for fam in families:
        m = {k: statistics.median(v) for k, v in times[fam].items()}
        print(f"| {fam} | {FAMILIES[fam][0]} | {m['bare']:.3f} | {m['grouped']:.3f} | {m['fit']:.3f} | "
              f"{m['fit'] / m['bare']:.2f}× | {m['fit'] / m['grouped']:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
