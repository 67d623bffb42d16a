"""The command line as users run it: real processes of the ``sqlnb`` console script and
``python -m sqlnb``, with real file descriptors (so DuckDB's own printing, exit codes
and the terminal checks are the real ones)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import duckdb
import pytest

import sqlnb
from support.cli import SCRIPT, assert_error, mixed_table, run_process, snapshot, write_parquet


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("proc")
    write_parquet(mixed_table(120, seed=1), d / "train.parquet")
    write_parquet(mixed_table(40, seed=2), d / "test.parquet")
    return d


def test_module_and_script_report_the_version():
    assert SCRIPT.exists()
    for module in (True, False):
        result = run_process("--version", module=module)
        assert result.returncode == 0 and result.stdout == f"sqlnb {sqlnb.__version__}\n" and result.stderr == ""


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_fit_score_evaluate_through_the_script(files, tmp_path):
    model = f"{tmp_path}/m.duckdb:nb"
    fit = run_process("fit", files / "train.parquet", "--label", "y", "--exclude", "id", "--model", model)
    assert (fit.returncode, fit.stdout, fit.stderr) == (0, "", "")  # stderr is not a terminal: silent
    score = run_process("score", files / "test.parquet", "--model", model, "--keep", "id", "--out", "-")
    assert score.returncode == 0 and score.stderr == ""
    lines = score.stdout.splitlines()  # nothing but the CSV, not even a progress bar
    assert lines[0] == "id,proba_a,proba_b,proba_c,prediction" and len(lines) == 41
    ev = run_process("evaluate", files / "test.parquet", "--model", model, "--format", "json", module=True)
    assert ev.returncode == 0 and ev.stdout.lstrip().startswith("{") and '"rows": 40' in ev.stdout


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_errors_from_a_real_process(files, tmp_path):
    before = snapshot(tmp_path)
    assert_error(run_process("fit", files / "train.parquet", "--label", "yy", "--model", f"{tmp_path}/m.duckdb:x"),
                 "label column 'yy' not found", "did you mean 'y'")
    assert_error(run_process("evaluate", files / "test.parquet", "-m", f"{tmp_path}/m.duckdb:x", module=True,
                             env={"SQLNB_MEMORY_LIMIT": "lots"}), "invalid memory limit 'lots'")
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_a_terminal_gets_the_summary_and_stdout_keeps_only_the_payload(files, tmp_path):
    import pty  # POSIX only

    model = f"{tmp_path}/m.duckdb:nb"
    sqlnb.fit(str(files / "train.parquet"), "y").save(f"{tmp_path}/m.duckdb", "nb")
    # stderr on a pseudo-terminal, stdout on a pipe: the summary (and DuckDB's progress
    # bar, which DuckDB itself prints on stdout) must go to the terminal only.
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([str(SCRIPT), "score", str(files / "test.parquet"), "-m", model, "--keep", "id",
                               "-o", "-"], stdout=subprocess.PIPE, stderr=follower, timeout=120, text=True)
        os.close(follower)
        follower = None
        terminal = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            terminal += chunk
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0] == "id,proba_a,proba_b,proba_c,prediction" and len(proc.stdout.splitlines()) == 41
    assert b"scored 40 rows into -" in terminal


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_an_interrupted_process_exits_130_and_writes_nothing(files, tmp_path):
    # DATA is a view that never ends: the 40 test rows 500 times (20,000 rows, past the
    # 10,000 that the unseen-category check reads first), then a scan of 2^62 numbers that
    # a hash filter, which no statistics can prove empty, lets (almost) none through. The
    # scoring would run for centuries writing nothing more, so the process cannot finish
    # before the signal however fast the machine. The handshake is the temporary output
    # file: it appears when DuckDB's COPY begins, i.e. the child is inside the scoring
    # query; SIGINT is sent then, and only then.
    db = tmp_path / "data.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE VIEW endless AS SELECT t.* FROM read_parquet('{files}/test.parquet') t, "
                    "range(4611686018427387904) r WHERE r.range < 500 OR hash(r.range) % 1000000007 = 0")
    model = f"{tmp_path}/m.duckdb:nb"
    sqlnb.fit(str(files / "train.parquet"), "y").save(f"{tmp_path}/m.duckdb", "nb")
    out = tmp_path / "out.csv"
    before = snapshot(tmp_path, tmp_path / "m.duckdb")
    proc = subprocess.Popen([str(SCRIPT), "score", f"{db}:endless", "-m", model, "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(name.startswith(".sqlnb-") for name in os.listdir(tmp_path)):
            assert proc.poll() is None, ("the endless scoring ended before the interrupt", proc.communicate())
            assert time.monotonic() < deadline, "no temporary output file within 120 s: COPY never began"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert stdout == "" and stderr.strip().splitlines()[-1] == "Error: interrupted; nothing was written"
    assert "Traceback" not in stderr
    assert snapshot(tmp_path, tmp_path / "m.duckdb") == before  # no out.csv, no temporary file


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("head") is None, reason="needs bash and head")
@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_a_reader_that_stops_early_is_not_an_error(tmp_path):
    # 20,000 scored rows are ~2 MB of CSV, far more than a pipe holds (64 KB on Linux):
    # `head -1` exits after the first line and the writes that follow hit the closed pipe.
    data = write_parquet(mixed_table(20_000, seed=3), tmp_path / "big.parquet")
    sqlnb.fit(data, "y").save(f"{tmp_path}/m.duckdb", "nb")

    def piped(*args: str) -> subprocess.CompletedProcess:
        script = 'set -o pipefail; "$@" | head -1'
        return subprocess.run(["bash", "-c", script, "bash", sys.executable, "-m", "sqlnb", *args],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)

    result = piped("score", data, "--model", "m.duckdb:nb", "--out", "-")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "id,x,z,color,flag,y,proba_a,proba_b,proba_c,prediction\n"
    # A failing command keeps its exit code and its one line when piped.
    failed = piped("score", "nope.parquet", "--model", "m.duckdb:nb", "--out", "-")
    assert_error(failed, "nope.parquet")


@pytest.mark.postgres
def test_an_engine_error_is_one_line(tmp_path):
    """An error raised by the engine while it runs sqlnb's query (here PostgreSQL's
    division by zero, in the training statistics) is one line, exit 2, no traceback.
    Spark's errors: tests/test_spark_cli.py."""
    from support.engines import start_postgres
    cm, dsn = start_postgres()
    try:
        result = run_process("--engine", "postgres", "--dsn", dsn, "fit",
                             "SELECT 1.0 / (g - 3) AS x, (g % 2)::text AS y FROM generate_series(1, 5) g",
                             "--label", "y", "--model", "m", module=True, cwd=tmp_path)
    finally:
        cm.__exit__(None, None, None)
    assert_error(result, "PostgreSQL: division by zero")
