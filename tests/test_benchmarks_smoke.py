"""The benchmark suite at a tiny size: a smoke test, not a timing (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # each runs a benchmark script in its own process


@pytest.mark.parametrize("shape", ["wide", "mixed", "categorical"])
def test_benchmark_runs_end_to_end_at_a_tiny_size(tmp_path, shape):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--rows", "3000", "--shapes", shape,
         "--repeat", "1", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    table = [line for line in out.stdout.splitlines() if line.startswith(f"| {shape} |")]
    # the results row has sqlnb's fit and score filled in (not skipped, '–')
    result = [line for line in table if line.count("|") > 8]
    assert result, out.stdout[-2000:]
    cells = [c.strip() for c in result[-1].split("|")]
    assert cells[3] != "–" and cells[4] != "–", result[-1]


def test_scale_benchmark_runs_at_tiny_sizes(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--rows", "2000", "5000", "--memory-limit", "128MB",
         "--data-dir", str(tmp_path), "--temp-directory", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith(("| 2,000 |", "| 5,000 |"))]
    assert len(rows) == 2, out.stdout[-2000:]
    for line in rows:  # every timing and RSS cell is a number
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert all(c.replace(",", "").replace(".", "").replace(" / ", "").isdigit() for c in cells), line
    assert not list(tmp_path.glob("sqlnb-scale-*"))  # the scored files were removed


def test_generated_features_are_independent_streams(tmp_path):
    # DuckDB's multi-argument hash is linear in its last argument, so unrehashed streams
    # hash(i, seed, j) differ by a constant XOR and the features are functions of one another
    # (before the fix: 1,154 distinct combinations in 10M categorical rows, correlations to 0.24).
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import duckdb
    import generate

    con = duckdb.connect()
    cat = generate.generate("categorical", 20000, 8, 3, tmp_path / "c", con=con)
    source = generate.parquet_table(cat["globs"]["data"]).sql("duckdb")
    combos = con.execute(f"SELECT count(*) FROM (SELECT DISTINCT c0, c1, c2, c3, c4, c5, c6, c7 FROM {source})").fetchone()[0]
    assert combos > 15000, combos
    wide = generate.generate("wide", 20000, 20, 3, tmp_path / "w", con=con)
    source = generate.parquet_table(wide["globs"]["data"]).sql("duckdb")
    pairs = ", ".join(f"abs(corr(x{a}, x{b}))" for a in range(20) for b in range(a + 1, 20))
    worst = con.execute(f"SELECT max(m) FROM (SELECT greatest({pairs}) AS m FROM {source} GROUP BY label)").fetchone()[0]
    # about 6,700 rows per class: the standard error of a correlation is ~0.012
    assert worst < 0.07, worst


def test_generated_categorical_columns_take_a_zipf_like_head_with_skew(tmp_path):
    """generate.py --skew: a column's first level takes over half its class's rows, and rows
    repeat value combinations (the default: nearly every row a combination of its own)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import duckdb
    import generate

    con = duckdb.connect()
    combos = {}
    for skew in ((1.0, 3.0), (16.0, 32.0)):
        meta = generate.generate("categorical", 20000, 8, 3, tmp_path / str(skew[0]), con=con, skew=skew)
        source = generate.parquet_table(meta["globs"]["data"]).sql("duckdb")
        combos[skew] = con.execute(f"SELECT count(*) FROM (SELECT DISTINCT * FROM {source})").fetchone()[0]
        head = con.execute(f"SELECT min(top) FROM (SELECT label, max(n) / sum(n) AS top FROM (SELECT label, c0, "
                           f"count(*) AS n FROM {source} GROUP BY ALL) GROUP BY label)").fetchone()[0]
        assert meta["skew"] == list(skew) and (head > 0.5) == (skew[0] > 3)
    assert combos[1.0, 3.0] > 15000 and combos[16.0, 32.0] < 20000 / 2, combos


def test_weighted_fit_benchmark_measures_both_designs_at_a_tiny_size(tmp_path):
    """weighted_fit.py, every row: the scan-per-iteration optimiser's loss and gradient come
    from SQL, and run long enough it reaches the weights Newton's method fits on the patterns."""
    import json
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "weighted_fit.py"), "--rows", "3000",
                          "--features", "3", "--repeat", "1", "--cv", "--scan-evals", "150", "--skew", "16", "32",
                          "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    names = [r[0] for r in result["results"]]
    assert names == ["naive Bayes fit", "weighted fit, l2 given", "weighted fit, l2 by CV", "pattern scan",
                     "scan per iteration (L-BFGS)", "naive Bayes: one scoring scan", "naive Bayes scoring to a table",
                     "weighted: one scoring scan", "weighted scoring to a table"], names
    scan = result["results"][4][2]
    assert float(scan.rsplit("= ", 1)[1]) < 1e-5, scan


def test_small_data_latency_benchmark_runs(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "small_data.py"), "--repeat", "1",
                          "--datasets", "iris"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    row = [line for line in out.stdout.splitlines() if line.startswith("| iris |")]
    assert len(row) == 1 and row[0].count("/") == 6, out.stdout[-2000:]  # first / median in every cell


def test_fit_floor_and_peer_benchmarks_run_at_a_tiny_size(tmp_path):
    """fit_floor.py for two families, and mllib.py's DuckDB column (its Spark columns start a
    JVM per measurement: run by hand, see benchmarks/README.md)."""
    floor = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fit_floor.py"), "--rows", "3000", "--repeat", "1",
                            "--families", "gaussian,multinomial", "--data-dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=600)
    assert floor.returncode == 0, floor.stderr[-2000:]
    assert [line.split("|")[1].strip() for line in floor.stdout.splitlines()
            if line.startswith(("| gaussian |", "| multinomial |"))] == ["gaussian", "multinomial"], floor.stdout[-2000:]
    peers = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mllib.py"), "--rows", "3000", "--repeat", "1",
                            "--tools", "sqlnb-duckdb", "--data-dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=600)
    assert peers.returncode == 0, peers.stderr[-2000:]
    rows = [line for line in peers.stdout.splitlines() if line.startswith(("| gaussian |", "| multinomial |"))]
    assert len(rows) == 4, peers.stdout[-2000:]


def test_wide_columns_benchmark_runs_at_a_tiny_size():
    """benchmarks/wide_columns.py at 300 columns (above WIDE_MIN: the long shape and the
    dot products), both kinds and the class-constant case, agreeing with scikit-learn."""
    for extra in ([], ["--class-constant"]):
        out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "wide_columns.py"), "--columns", "300",
                              "--rows", "200", *extra], capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        rows = [line for line in out.stdout.splitlines() if line.startswith("| 300 |")]
        assert len(rows) == 2, out.stdout
        for line in rows:
            assert float(line.strip("|").split("|")[-1]) < 1e-9, line


def test_row_order_benchmark_runs_at_a_tiny_size():
    """benchmarks/row_order_2m.py (the 2,000,000-row reproductions moved out of the suite) at
    20,000 rows: every check holds and the table has its three runs."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "row_order_2m.py"), "--rows", "20000"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith(("| bare", "| tight"))]
    assert len(rows) == 3 and all(line.rstrip().endswith("| True |") for line in rows), out.stdout


def test_venn_abers_benchmark_runs_at_a_tiny_size(tmp_path):
    """benchmarks/venn_abers_scoring.py at 20,000 rows, calibrated on 1,000: both models timed, and the
    floor of writing the interval columns."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "venn_abers_scoring.py"), "--rows", "20000", "--repeat", "1",
                          "--held-out", "1000", "--data", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines()
            if line.startswith(("| uncalibrated |", "| uncalibrated + 6 DOUBLE columns |", "| venn-abers |"))]
    assert len(rows) == 3, out.stdout
