"""The benchmark suite at a tiny size: a smoke test, not a timing (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
