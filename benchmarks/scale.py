"""Scale: fit and score time against N, up to a data set larger than the machine's memory.

For each size N the ``wide`` data set (N rows x 20 DOUBLE x 3 classes, ``generate.py``,
cached in ``benchmarks/data/``) is fitted and scored by sqlnb in a fresh process whose
DuckDB connection has a memory limit far below the data (``--memory-limit``, default 2GB),
next to the bare scan of the same columns; every step reports its wall time and the peak
RSS of its process. Scoring writes prediction and probabilities to a Parquet file (on the
same disk, removed afterwards). An untimed bare scan runs first at each size, so that every
timed step finds the same page cache; at 160M rows (23.9 GiB of Parquet on a 23.5 GiB
machine) the files cannot all stay cached and each step reads from disk.

scikit-learn is not run here: at 10M rows its read + fit already peaks at ~8.5 GB
(``run.py``), and it needs the whole float64 matrix in memory (N x 20 x 8 bytes: 25.6 GB
at 160M rows, more than this machine has), while each sqlnb step streams.

Examples
--------
python benchmarks/scale.py --rows 1000000 10000000 40000000 160000000 --write-readme
python benchmarks/scale.py --rows 1000000 3000000 --memory-limit 256MB
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import baselines  # noqa: E402
import generate  # noqa: E402
import run  # noqa: E402

README = HERE / "README.md"
FEATURES, CLASSES = 20, 3
ROWS_PER_FILE = 10_000_000


def data_dir(rows: int, root: Path) -> tuple[Path, int]:
    files = max(1, rows // ROWS_PER_FILE)
    return root / f"wide-r{rows}-d{FEATURES}-k{CLASSES}-s0-f{files}", files


def _connect(settings: dict):
    import sqlnb

    con = sqlnb.connect(**settings)
    con.execute("SET enable_progress_bar = false")
    return con


def step(kind: str, meta: dict, settings: dict) -> dict:
    """One timed step in this (fresh) process: ``scan``, ``fit`` or ``fit+score``.

    ``fit+score`` fits first (not timed) and then times scoring to Parquet."""
    import sqlnb

    con = _connect(settings)
    glob = meta["globs"]["data"]
    out: dict = {}
    if kind == "scan":
        query = baselines.scan_queries(meta)[0]
        t0 = time.perf_counter()
        con.execute(query).fetchall()
        out["seconds"] = time.perf_counter() - t0
    elif kind == "fit":
        t0 = time.perf_counter()
        model = sqlnb.fit(glob, meta["label"], con=con)
        out["seconds"] = time.perf_counter() - t0
        out["rows"] = model.report.get("rows")
    else:
        model = sqlnb.fit(glob, meta["label"], con=con)
        target = Path(tempfile.mkdtemp(prefix="sqlnb-scale-", dir=settings.get("temp_directory")))
        try:
            t0 = time.perf_counter()
            model.score(glob, con, outputs=("proba", "prediction"), keep=[]).write_parquet(str(target / "scored.parquet"))
            out["seconds"] = time.perf_counter() - t0
            out["output_bytes"] = (target / "scored.parquet").stat().st_size
        finally:
            shutil.rmtree(target, ignore_errors=True)
    out["peak_rss_mb"] = baselines.peak_rss_mb()
    return out


def measure(rows: int, root: Path, settings: dict, repeat: int) -> dict:
    out_dir, files = data_dir(rows, root)
    if not (out_dir / "meta.json").exists():
        run.log(f"generating {out_dir.name} ...")
    meta = baselines.isolated(generate.load_or_generate, "wide", rows, FEATURES, CLASSES, out_dir, seed=0, files=files)
    res = {"meta": meta}
    # One untimed read first, so that no step pays for reading cold files that the steps
    # after it find in the page cache (above RAM size every step reads from disk anyway).
    baselines.isolated(step, "scan", meta, settings)
    for kind in ("scan", "fit", "fit+score"):
        runs = [baselines.isolated(step, kind, meta, settings) for _ in range(repeat)]
        res[kind] = {"seconds": min(r["seconds"] for r in runs), "median": sorted(r["seconds"] for r in runs)[len(runs) // 2],
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)}
        run.log(f"{rows:,} rows {kind}: {res[kind]['seconds']:.2f} s, peak RSS {res[kind]['peak_rss_mb']:.0f} MiB")
    return res


def markdown(results: list[dict], settings: dict, command: str, repeat: int, info: dict) -> str:
    m = info["machine"]
    lines = [
        f"Command: `{command}`  ",
        f"Machine: {m['cpu']}, {m['memory']} RAM, {m['os']}  ",
        f"Versions: {m['versions']}  ",
        f"DuckDB settings: {', '.join(f'{k}={v}' for k, v in settings.items()) or 'defaults'}; "
        f"load average (1 min) at start / end: {info['load'][0]:.2f} / {info['load'][1]:.2f}",
        "",
        f"Wall seconds, min / median of {repeat}, each in a fresh process; peak RSS of that process (MiB, "
        "interpreter included). Scoring writes prediction + 3 probabilities to Parquet.",
        "",
        "| rows | Parquet (GiB) | bare scan | sqlnb fit | fit ÷ scan | fit µs/row | score → Parquet | score µs/row | peak RSS scan / fit / score |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        n = r["meta"]["rows"]["data"]
        s, f, q = r["scan"], r["fit"], r["fit+score"]
        lines.append(
            f"| {n:,} | {r['meta']['bytes'] / 2**30:.2f} | {s['seconds']:.2f} / {s['median']:.2f} | "
            f"{f['seconds']:.2f} / {f['median']:.2f} | {f['seconds'] / s['seconds']:.2f} | {1e6 * f['seconds'] / n:.3f} | "
            f"{q['seconds']:.2f} / {q['median']:.2f} | {1e6 * q['seconds'] / n:.3f} | "
            f"{s['peak_rss_mb']:.0f} / {f['peak_rss_mb']:.0f} / {q['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("Examples"):],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000, 40_000_000, 160_000_000])
    ap.add_argument("--memory-limit", default="2GB", help="DuckDB memory_limit of every step (default 2GB)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--temp-directory", default=None, help="DuckDB spill directory (also where the scored file goes)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--write-readme", action="store_true", help="store the table under '## Scale' in README.md")
    args = ap.parse_args(argv)
    settings = {k: v for k, v in (("memory_limit", args.memory_limit), ("threads", args.threads),
                                  ("temp_directory", args.temp_directory)) if v is not None}
    load0 = os.getloadavg()[0]
    results = [measure(n, args.data_dir, settings, args.repeat) for n in sorted(args.rows)]
    info = {"machine": run.machine(), "load": (load0, os.getloadavg()[0])}
    command = "python benchmarks/scale.py " + " ".join(a for a in (argv if argv is not None else sys.argv[1:]))
    table = markdown(results, settings, command.strip(), args.repeat, info)
    print(table)
    if args.write_readme:
        text = README.read_text()
        section = "## Scale\n\n" + (__doc__.split("\n\n")[1]) + "\n\n" + table + "\n"
        pattern = re.compile(r"^## Scale\n.*?(?=^## |^<!-- results |\Z)", re.S | re.M)
        text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
        README.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
