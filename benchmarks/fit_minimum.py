"""The least a fit process can cost: sqlnb's own statements, run by the leanest process that
could run them, step by step against the bare scan.

``fit_floor.py --processes`` compares the whole ``sqlnb fit`` process with a bare scan, each
with its own start subtracted. This script asks what part of the gap is sqlnb's doing and
what part any process doing the same work pays. The parent runs one ``sqlnb.fit`` with a
recorder on :class:`sqlnb.engines.DuckDBEngine` and keeps the SQL text of every statement
it runs (screening, the Gaussian shift read, the statistics scan). Then, in fresh child
processes, alternating, ``--repeat`` rounds (plus an untimed one), each child starting as the
bare scan's does (``import duckdb``, a connection, the progress bar off; that start is
subtracted from all):

1. ``bare``: ``fit_floor.py``'s bare scan (``SELECT sum(x0), ..., bit_xor(hash(label))``);
2. ``statistics``: sqlnb's statistics statement alone, its text given;
3. ``+ first rows``: screening's and the shift read's statements before it (their texts);
4. ``+ model file``: then a new DuckDB file opened, one table of 20 DOUBLE columns and 60
   rows (a model's parameters are about that size) written in a transaction, closed;
5. ``+ SQL rendered``: the same, each statement's text rendered in the child from sqlglot
   trees by ``sqlnb.sql.render`` (sqlglot and sqlnb imported at start, as ``sqlnb fit
   --help`` imports them, and frozen out of garbage collection as the ``sqlnb`` process
   freezes them: what the first render imports after that is counted);
6. ``sqlnb fit``: the CLI itself (``sqlnb fit DATA --label label --model TMP:m --replace``),
   less the start of ``sqlnb fit --help``, as ``fit_floor.py --processes`` measures it.

Each row is (child − start) ÷ (bare − start), wall and CPU.

Example
-------
python benchmarks/fit_minimum.py --rows 10000000 --family gaussian --repeat 7 --data-dir /tmp/floor/data
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fit_floor  # noqa: E402

#: The bare scan's process start (fit_floor._bare_script's preamble).
START = "import duckdb\ncon = duckdb.connect()\ncon.execute('SET enable_progress_bar = false')\n"

#: Step 4: a model-sized table written to a DuckDB file in a transaction.
MODEL_FILE = """
import os
path = {path!r}
for p in (path, path + '.wal'):
    if os.path.exists(p):
        os.remove(p)
store = duckdb.connect(path)
store.execute('BEGIN')
store.execute('CREATE TABLE params AS SELECT ' + ', '.join(f'range + {{j}}.0 AS p{{j}}' for j in range(20)) + ' FROM range(60)')
store.execute('COMMIT')
store.close()
"""


def recorded_statements(data: str, label: str, kind: str | None) -> list:
    """The sqlglot trees of the statements one ``sqlnb.fit`` runs on a DuckDB engine."""
    import sqlnb
    from sqlnb.engines import DuckDBEngine

    trees: list = []
    execute = DuckDBEngine.execute

    def run(self, tree, *args, **kwargs):
        trees.append(tree.copy())
        return execute(self, tree, *args, **kwargs)

    DuckDBEngine.execute = run
    try:
        sqlnb.fit(data, label, **({"kind": kind} if kind else {}))
    finally:
        DuckDBEngine.execute = execute
    return trees


def children(trees: list, model_path: str) -> dict[str, str]:
    """``{step: python -c text}`` of steps 2–5 (module docstring)."""
    from sqlnb import sql

    texts = [sql.render(t) for t in trees]
    stats = max(texts, key=lambda t: ("GROUP BY" in t, len(t)))
    first = texts[:texts.index(stats)]
    run = "".join(f"con.execute({t!r}).fetchall()\n" for t in first)
    model = MODEL_FILE.format(path=model_path)
    # Step 5 renders the very trees in the child: pickled trees, loaded at start (sqlglot's
    # expression classes are imported by then, as `sqlnb fit --help` imports them).
    import base64
    import pickle

    blob = base64.b64encode(pickle.dumps(trees)).decode()
    rendered_start = ("import base64, gc, pickle\nimport sqlnb.cli.train, sqlnb.sql\n"
                      f"trees = pickle.loads(base64.b64decode({blob!r}))\ngc.freeze()\n")
    rendered = ("for t in trees:\n    con.execute(sqlnb.sql.render(t)).fetchall()\n")
    # the SET statements of DuckDBEngine.first_rows run too: they are in `trees`
    return {
        "statistics": START + f"con.execute({stats!r}).fetchall()\n",
        "+ first rows": START + run + f"con.execute({stats!r}).fetchall()\n",
        "+ model file": START + run + f"con.execute({stats!r}).fetchall()\n" + model,
        "+ SQL rendered": START + rendered_start + "__START__" + rendered + model,
    }


def main(argv=None) -> int:
    args, meta, kwargs = fit_floor.family_arguments(__doc__, argv)
    py = sys.executable
    load0 = fit_floor._load()
    trees = recorded_statements(meta["globs"]["data"], meta["label"], kwargs.get("kind"))
    with tempfile.TemporaryDirectory() as tmp:
        steps = children(trees, str(Path(tmp) / "model.duckdb"))
        rendered = steps.pop("+ SQL rendered")
        rendered_start, rendered_run = rendered.split("__START__")
        fit = [py, "-m", "sqlnb", "fit", meta["globs"]["data"], "--label", meta["label"], "--model",
               f"{Path(tmp) / 'm.duckdb'}:m", "--replace"] + (["--kind", kwargs["kind"]] if "kind" in kwargs else [])
        runs: dict[str, list] = {}
        for r in range(args.repeat + 1):  # round 0: bytecode caches written, files cached
            got = {"start": fit_floor._timed_process([py, "-c", START], tmp),
                   "bare": fit_floor._timed_process([py, "-c", fit_floor._bare_script(meta, True)], tmp)}
            for name, code in steps.items():
                got[name] = fit_floor._timed_process([py, "-c", code], tmp)
            rs = fit_floor._timed_process([py, "-c", rendered_start], tmp)
            rr = fit_floor._timed_process([py, "-c", rendered_start + rendered_run], tmp)
            got["+ SQL rendered"] = (rr[0] - rs[0] + got["start"][0], rr[1] - rs[1] + got["start"][1])
            fs = fit_floor._timed_process([py, "-m", "sqlnb", "fit", "--help"], tmp)
            f = fit_floor._timed_process(fit, tmp)
            got["sqlnb fit"] = (f[0] - fs[0] + got["start"][0], f[1] - fs[1] + got["start"][1])
            if r:
                for k, v in got.items():
                    runs.setdefault(k, []).append(v)
                base = got["bare"][0] - got["start"][0]
                print(f"round {r}: " + ", ".join(f"{k} {(v[0] - got['start'][0]) / base:.2f}"
                                                  for k, v in got.items() if k not in ("start",)), file=sys.stderr)
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in runs.items()}
    s_wall, s_cpu = med["start"]
    b_wall, b_cpu = med["bare"][0] - s_wall, med["bare"][1] - s_cpu
    print(f"`python benchmarks/fit_minimum.py {' '.join(argv if argv is not None else sys.argv[1:])}`; "
          f"{args.rows:,} rows, {args.family}; medians of {args.repeat}; start {s_wall:.3f} s wall; "
          f"load before {load0}, after {fit_floor._load()}\n")
    print("| process (its start subtracted) | wall s | CPU s | ÷ bare, wall | ÷ bare, CPU |\n|---|---:|---:|---:|---:|")
    for k, (w, c) in med.items():
        if k == "start":
            continue
        print(f"| {k} | {w - s_wall:.3f} | {c - s_cpu:.3f} | {(w - s_wall) / b_wall:.2f} | {(c - s_cpu) / b_cpu:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
