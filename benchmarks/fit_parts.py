"""Where a ``sqlnb fit`` process's time goes after its start, against the bare scan.

The aim is a Gaussian fit that costs ≤ 1.3× a bare scan of the same file with
each process's start subtracted (``fit_floor.py --processes``). This script splits the fit
process's time after its start into its steps, so that what stands between the two is
named: each child runs the very CLI (``sqlnb fit DATA --label label --kind FAMILY --model
TMP:m --replace``) with a few of its functions wrapped by timers (the first connection, each
statement the DuckDB engine runs, ``sqlnb.api.fit`` as a whole, the model saved). The bare
scan is ``fit_floor.py``'s (``SELECT sum(x0), …, bit_xor(hash(label))`` in a fresh process,
its start — importing duckdb and connecting — subtracted). Children run without
``PYTHONDONTWRITEBYTECODE`` after one untimed round (``fit_floor.py``'s reasons).

Example
-------
python benchmarks/fit_parts.py --rows 10000000 --family gaussian --repeat 5 --data-dir /tmp/floor/data
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fit_floor  # noqa: E402

#: The child: the CLI with timers around its steps; the timings go to stderr as one JSON line.
CHILD = r'''
import json, sys, time
import sqlnb.cli.app as app
import sqlnb.cli.train as train
import sqlnb.engines.duckdb as engine
parts, stack = [], []
def timed(owner, name, label):
    f = getattr(owner, name)
    def wrapper(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        outer = stack[-1] if stack else None
        stack.append(label)
        try:
            return f(*a, **k)
        finally:
            stack.pop()
            parts.append((label, outer, time.perf_counter() - t, time.process_time() - c))
    setattr(owner, name, wrapper)
timed(app.Settings, "connect", "connection")
timed(engine.DuckDBEngine, "execute", "statement")
execute = engine.DuckDBEngine.execute
def classified(self, tree, *a, **k):  # DuckDBEngine.first_rows's own statements: "setting"
    from sqlglot import exp
    setting = isinstance(tree, exp.Set) or "current_setting" in tree.sql().lower()
    if not setting:
        return execute(self, tree, *a, **k)
    n = len(parts)
    try:
        return execute(self, tree, *a, **k)
    finally:
        label, outer, wall, cpu = parts[n]
        parts[n] = ("setting", outer, wall, cpu)
engine.DuckDBEngine.execute = classified
timed(train.api, "fit", "sqlnb.api.fit")
timed(train, "save", "save")
t0, c0 = time.perf_counter(), time.process_time()
sys.argv = ["sqlnb"] + sys.argv[1:]
from sqlnb.cli import main
try:
    main()
except SystemExit as e:
    if e.code:
        raise
parts.append(("main", None, time.perf_counter() - t0, time.process_time() - c0))
print(json.dumps(parts), file=sys.stderr)
'''


def _parts(cmd: list[str], cwd: str) -> list[tuple[str, float, float]]:
    out = subprocess.run(cmd, capture_output=True, text=True, env=fit_floor._child_env(), cwd=cwd)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)[:200]} failed: {out.stderr[-2000:]}")
    return json.loads(out.stderr.strip().splitlines()[-1])


def main(argv=None) -> int:
    args, meta, kwargs = fit_floor.family_arguments(__doc__, argv)
    py = sys.executable
    rounds: list[dict[str, tuple[float, float]]] = []
    bare: list[tuple[float, float]] = []
    load0 = fit_floor._load()
    with tempfile.TemporaryDirectory() as tmp:
        fit = [py, "-c", CHILD, "fit", meta["globs"]["data"], "--label", meta["label"], "--model",
               f"{Path(tmp) / 'm.duckdb'}:m", "--replace"] + (["--kind", kwargs["kind"]] if "kind" in kwargs else [])
        for r in range(args.repeat + 1):  # round 0: bytecode caches written, files cached
            start = fit_floor._timed_process([py, "-c", fit_floor._bare_script(meta, False)], tmp)
            scan = fit_floor._timed_process([py, "-c", fit_floor._bare_script(meta, True)], tmp)
            parts = _parts(fit, tmp)
            if r == 0:
                continue
            bare.append((scan[0] - start[0], scan[1] - start[1]))
            named: dict[str, list[float]] = {}
            n = 0
            for label, outer, wall, cpu in parts:
                if label == "setting":  # DuckDBEngine.first_rows: summed into one line
                    prev = named.get("first_rows settings (SET, current_setting)", [0.0, 0.0])
                    named["first_rows settings (SET, current_setting)"] = [prev[0] + wall, prev[1] + cpu]
                    continue
                if label == "statement":
                    n += 1
                    label = f"statement {n}" + ("" if outer == "sqlnb.api.fit" else f" (in {outer})")
                elif label == "connection":
                    label = "the data's connection" if outer is None else f"{outer}: its connection"
                named[label] = [wall, cpu]
            mine = [k for k in named if (k.startswith("statement") and "(in" not in k) or k.startswith("first_rows")]
            inner = sum(named[k][0] for k in mine)
            inner_cpu = sum(named[k][1] for k in mine)
            named["sqlnb.api.fit beyond its statements"] = [named["sqlnb.api.fit"][0] - inner,
                                                            named["sqlnb.api.fit"][1] - inner_cpu]
            top = ("the data's connection", "sqlnb.api.fit", "save")
            named["the rest (CLI, imports after the start, output)"] = [
                named["main"][0] - sum(named[k][0] for k in top), named["main"][1] - sum(named[k][1] for k in top)]
            rounds.append(named)
    bare_wall = statistics.median(b[0] for b in bare)
    bare_cpu = statistics.median(b[1] for b in bare)
    print(f"`python benchmarks/fit_parts.py {' '.join(argv if argv is not None else sys.argv[1:])}`; "
          f"{args.rows:,} rows, {args.family}; medians of {args.repeat}; load before {load0}, after {fit_floor._load()}\n")
    print("| step of `sqlnb fit` after `main()` starts | wall s | CPU s | wall ÷ bare scan |\n|---|---:|---:|---:|")
    print(f"| bare scan (its process start subtracted) | {bare_wall:.3f} | {bare_cpu:.3f} | 1.00 |")
    for key in rounds[0]:
        label = "whole `main()` (≈ the fit's process less its start)" if key == "main" else key
        wall = statistics.median(r[key][0] for r in rounds if key in r)
        cpu = statistics.median(r[key][1] for r in rounds if key in r)
        print(f"| {label} | {wall:.3f} | {cpu:.3f} | {wall / bare_wall:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
