"""Run the sqlnb benchmarks and print a markdown results table.

For each shape: generate the data set once (cached under ``--data-dir``, keyed by its
parameters), then time, each in a fresh child process so peak RSS is its own:

1. the bare DuckDB scan of the columns a fit reads (``baselines.bare_scan``);
2. ``sqlnb_fit`` / ``sqlnb_score`` (the hooks below; skipped while they raise
   ``NotImplementedError``);
3. scikit-learn load / fit / predict_proba (``baselines.sklearn_baseline``).

Shape dimensions are fixed in ``SHAPES``; ``--rows`` sets the rows of wide / mixed /
categorical, while text uses ``--text-docs`` documents (300k give ~13.6M token rows).
Progress goes to stderr, the markdown to stdout.

Examples
--------
python benchmarks/run.py --rows 1000000
python benchmarks/run.py --rows 10000000 --shapes wide --write-readme
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402
import generate  # noqa: E402

# shape -> (features, classes); features = vocabulary size for text
SHAPES = {"wide": (20, 3), "mixed": (16, 3), "categorical": (8, 3), "text": (50_000, 20)}
README = HERE / "README.md"


# ==============================================================================================
# sqlnb HOOKS: replace the two bodies below with sqlnb's own fit and score calls.
# Both are timed as a whole (``--repeat`` times) in a child process with a fresh connection.
# ==============================================================================================


def sqlnb_fit(con, glob: str, label: str, shape: str, meta: dict):
    """Fit sqlnb's model for ``shape`` on the Parquet files ``glob``; return the fitted model.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Fresh in-memory connection, default settings except the progress bar (off).
    glob : str
        ``*.parquet`` glob of the training table (the token table for ``text``; the documents
        table is ``meta["globs"]["docs"]``, joined on ``doc_id``).
    label : str
        Label column (``'label'``, VARCHAR ``'c0'``, ``'c1'``, ...).
    shape : {'wide', 'mixed', 'categorical', 'text'}
        Model to fit: GaussianNB / Gaussian + categorical / CategoricalNB / MultinomialNB.
    meta : dict
        ``meta.json`` of the data set: ``numeric`` and ``categorical`` column lists, ``globs``.
    """
    import sqlnb

    if shape == "text":
        return sqlnb.fit_long(meta["globs"]["tokens"], meta["globs"]["docs"], id="doc_id", token="token",
                              count="n", label=label, kind="multinomial", con=con)
    # Column kinds come from the types: DOUBLE -> gaussian, VARCHAR -> categorical.
    return sqlnb.fit(glob, label, con=con)


def sqlnb_score(con, model, glob: str, label: str, shape: str, meta: dict):
    """Score every row of ``glob`` with ``model`` and run the query to completion.

    Must consume the whole result (e.g. write the class probabilities to a table or Parquet,
    or aggregate them), since the timer stops when this returns. Arguments as in ``sqlnb_fit``.
    """
    import os
    import tempfile


    # Scoring writes prediction and probabilities to a Parquet file, like a user's job.
    out = os.path.join(tempfile.mkdtemp(prefix="sqlnb-bench-"), "scored.parquet")
    if shape == "text":
        rel = model.score_long(meta["globs"]["tokens"], meta["globs"]["docs"], con=con)
    else:
        rel = model.score(glob, con, outputs=("proba", "prediction"), keep=[])
    rel.write_parquet(out)
    os.remove(out)


# ==============================================================================================


def sqlnb_timings(meta: dict, repeat: int) -> dict:
    """Time the hooks; ``{"skipped": reason}`` if a hook is not implemented."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    table = "tokens" if meta["shape"] == "text" else "data"
    args = (meta["globs"][table], meta["label"], meta["shape"], meta)
    out = {}
    try:
        out["sqlnb_fit"], model = baselines.timed(lambda: sqlnb_fit(con, *args), repeat)
        out["sqlnb_score"], _ = baselines.timed(lambda: sqlnb_score(con, model, *args), repeat)
    except NotImplementedError as e:
        out["skipped"] = str(e)
    out["peak_rss_mb"] = baselines.peak_rss_mb()
    return out


def dataset(shape: str, rows: int, data_dir: Path, seed: int, files: int, regenerate: bool) -> dict:
    """Generate (in a child process) or reuse one data set; returns its ``meta.json``."""
    features, classes = SHAPES[shape]
    out = data_dir / f"{shape}-r{rows}-d{features}-k{classes}-s{seed}-f{files}"
    if regenerate or not (out / "meta.json").exists():
        log(f"generating {out.name} ...")
    return baselines.isolated(generate.load_or_generate, shape, rows, features, classes, out, regenerate, seed=seed, files=files)


def machine() -> dict:
    """CPU, memory, OS and library versions."""
    import duckdb
    import numpy
    import pyarrow
    import sklearn
    import sqlglot

    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": f"{cpu}, {os.cpu_count()} CPUs",
        "memory": f"{mem:.1f} GiB",
        "os": platform.platform(),
        "versions": f"Python {platform.python_version()}, duckdb {duckdb.__version__}, scikit-learn {sklearn.__version__}, "
        f"numpy {numpy.__version__}, pyarrow {pyarrow.__version__}, sqlglot {sqlglot.__version__}",
    }


def _cell(stats) -> str:
    return f"{stats['median']:.3f} / {stats['min']:.3f} ({stats['cpu']:.2f})" if stats else "–"


def markdown(results: dict, info: dict, command: str, repeat: int) -> str:
    """Render the results as markdown (data table, timings table, notes)."""
    m = info["machine"]
    lines = [
        f"Command: `{command}`  ",
        f"Machine: {m['cpu']}, {m['memory']} RAM, {m['os']}  ",
        f"Versions: {m['versions']}  ",
        f"Load average (1 min) at start / end: {info['load'][0]:.2f} / {info['load'][1]:.2f}; run took {info['seconds']:.0f} s",
        "",
        "| shape | rows | features | classes | files | size on disk (MiB) | generate (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for shape, r in results.items():
        meta = r["meta"]
        rows = ", ".join(f"{k} {v:,}" for k, v in meta["rows"].items()) if shape == "text" else f"{meta['rows']['data']:,}"
        lines.append(f"| {shape} | {rows} | {meta['features']:,} | {meta['classes']} | {meta['files']} | {meta['bytes'] / 2**20:,.1f} | {meta['seconds']:.1f} |")
    lines += [
        "",
        f"Wall seconds, median / min of {repeat} (median CPU seconds, all threads). Peak RSS (MiB) per child process, interpreter included.",
        "",
        "| shape | DuckDB bare scan | sqlnb fit | sqlnb score | sklearn load | sklearn fit | sklearn predict_proba | sklearn load+fit (median) | peak RSS scan / sqlnb / sklearn |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    skipped = {}
    for shape, r in results.items():
        s, q, k = r["scan"], r["sqlnb"], r["sklearn"]
        if "skipped" in q:
            skipped.setdefault(q["skipped"], []).append(shape)
        cells = [_cell(s["bare_scan"]), _cell(q.get("sqlnb_fit")), _cell(q.get("sqlnb_score"))]
        cells += [_cell(k["sklearn_load"]), _cell(k["sklearn_fit"]), _cell(k["sklearn_predict_proba"])]
        cells.append(f"{k['sklearn_load']['median'] + k['sklearn_fit']['median']:.3f}")
        cells.append(f"{s['peak_rss_mb']:.0f} / {q['peak_rss_mb']:.0f} / {k['peak_rss_mb']:.0f}")
        lines.append(f"| {shape} | " + " | ".join(cells) + " |")
    notes = [f"- sqlnb skipped for {', '.join(shapes)}: {reason}." for reason, shapes in skipped.items()]
    if info["load"][0] > os.cpu_count():
        notes.append(f"- Load average {info['load'][0]:.1f} > {os.cpu_count()} CPUs at start: other processes shared the machine; trust min over median.")
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def write_readme(block: str, key: str) -> None:
    """Replace (or append) the block between ``<!-- results KEY start/end -->`` in README.md."""
    start, end = f"<!-- results {key} start -->", f"<!-- results {key} end -->"
    text = README.read_text() if README.exists() else "# sqlnb benchmarks\n"
    new = f"{start}\n{block}{end}"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: new, text) if pattern.search(text) else text.rstrip("\n") + f"\n\n{new}\n"
    README.write_text(text)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("Examples"):], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, required=True, help="rows of the wide / mixed / categorical data sets")
    ap.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--text-docs", type=int, default=300_000, help="documents of the text data set")
    ap.add_argument("--files", type=int, default=1, help="Parquet files per table")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--regenerate", action="store_true", help="ignore cached data sets")
    ap.add_argument("--write-readme", action="store_true", help=f"write the table into {README.name} between markers")
    a = ap.parse_args(argv)
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    results = {}
    for shape in a.shapes:
        rows = a.text_docs if shape == "text" else a.rows
        meta = dataset(shape, rows, a.data_dir, a.seed, a.files, a.regenerate)
        log(f"{shape}: bare scan ...")
        scan = baselines.isolated(baselines.bare_scan, meta, a.repeat)
        log(f"{shape}: sqlnb ...")
        sq = baselines.isolated(sqlnb_timings, meta, a.repeat)
        if "skipped" in sq:
            log(f"{shape}: sqlnb skipped: {sq['skipped']}")
        log(f"{shape}: scikit-learn ...")
        sk = baselines.isolated(baselines.sklearn_baseline, meta, a.repeat)
        results[shape] = {"meta": meta, "scan": scan, "sqlnb": sq, "sklearn": sk}
    info = {"machine": machine(), "load": (load0, os.getloadavg()[0]), "seconds": time.perf_counter() - t0}
    command = "python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    block = markdown(results, info, command, a.repeat)
    print(block)
    if a.write_readme:
        write_readme(block, f"rows={a.rows} shapes={','.join(a.shapes)}")
        log(f"wrote {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
