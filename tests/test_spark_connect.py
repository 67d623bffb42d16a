"""``--engine spark --remote sc://host:port``: sqlnb through Spark Connect, the way managed
Spark services are reached, against a local Spark Connect server that the module starts
itself (the one pyspark ships, :func:`support.spark.connect_server`), once.

The command-line steps run once, in order, each in its own process (a Connect client
starts in about a second: the JVM is the server's), in the module fixture ``runs``; the
tests then check one step each. A Gaussian and a multinomial model are fitted, saved,
listed, shown, scored and dropped on the server, and their probabilities compared with
the same models fitted and scored in DuckDB. Bad master and Connect URLs, an unreachable
server and a missing Connect client are one ``Error:`` line with exit code 2. Without
pyspark or Java the tests are skipped with the reason; on CI (``CI`` set) that is a
failure, as in test_engines.py.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import sqlnb
from sqlnb.cli import EXIT_USAGE
from support.cli import assert_error, invoke, mixed_table, run_process, write_parquet
from support.engines import unavailable
from support.spark import SparkNotAvailable, connect_server

pytestmark = pytest.mark.spark

TOL = 1e-9
#: The Python modules that the subprocesses must import: this checkout's.
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server():
    """The URL of a Spark Connect server running for this module."""
    try:
        cm = connect_server()
        url = cm.__enter__()
    except SparkNotAvailable as e:
        unavailable("Spark Connect", e)
    try:
        import pyspark.sql.connect.session  # noqa: F401  the client: pyspark's [connect] extra
    except ImportError as e:
        cm.__exit__(None, None, None)
        pytest.fail(f"pyspark's Spark Connect client is not installed ({e}): pip install -e '.[test]'",
                    pytrace=False)
    yield url
    cm.__exit__(None, None, None)


def counts_table(n: int, seed: int) -> pa.Table:
    """Word counts c0..c3 whose rates depend on the class ``y``, and an ``id``."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 3, n)
    rates = np.array([[4.0, 1.0, 1.0, 2.0], [1.0, 4.0, 1.0, 2.0], [1.0, 1.0, 4.0, 0.5]])[k]
    counts = rng.poisson(rates)
    return pa.table({"id": pa.array(np.arange(n), pa.int64()),
                     **{f"c{j}": pa.array(counts[:, j], pa.int64()) for j in range(4)},
                     "y": pa.array(np.array(["a", "b", "c"], dtype=object)[k].tolist())})


def cli(*args, env: dict | None = None):
    """``python -m sqlnb ARGS`` in a new process, importing this checkout."""
    path = os.pathsep.join(filter(None, [*(env or {}).get("PYTHONPATH", "").split(os.pathsep), str(ROOT),
                                         os.environ.get("PYTHONPATH", "")]))
    return run_process(*args, module=True, env={**(env or {}), "PYTHONPATH": path})


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


#: Models and their data: (model name, train file, test file, fit options).
MODELS = {
    "gauss": ("train.parquet", "test.parquet", ["--kind", "gaussian", "--features", "x,z"]),
    "multi": ("counts_train.parquet", "counts_test.parquet", ["--kind", "multinomial", "--features", "c0,c1,c2,c3"]),
}


@pytest.fixture(scope="module")
def runs(server, tmp_path_factory):
    """``{step: CompletedProcess}`` of the command-line steps, and the paths."""
    root = tmp_path_factory.mktemp("spark_connect")
    write_parquet(mixed_table(120, seed=1), root / "train.parquet")
    write_parquet(mixed_table(40, seed=2), root / "test.parquet")
    write_parquet(counts_table(150, seed=3), root / "counts_train.parquet")
    write_parquet(counts_table(50, seed=4), root / "counts_test.parquet")
    # pyspark's Connect client, made unimportable: gRPC is one of its packages.
    hidden = root / "no_grpc" / "grpc"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'grpc'\", name='grpc')\n")
    remote = ["--engine", "spark", "--remote", server]
    out = {"root": root}
    steps = {}
    for name, (train, _, options) in MODELS.items():
        steps[f"fit_{name}"] = [*remote, "fit", root / train, "--label", "y", *options, "--model", name]
    steps["fit_again"] = [*remote, "fit", root / "train.parquet", "--label", "y", "--model", "gauss"]
    steps["models"] = [*remote, "models", "--format", "json"]
    steps["show"] = [*remote, "show", "--model", "multi", "--format", "json"]
    for name, (_, test, _) in MODELS.items():
        steps[f"score_{name}"] = [*remote, "score", root / test, "--model", name, "--key", "id",
                                  "--out", root / f"scored_{name}.parquet"]
    # evaluate reads the model from the server (and, wherever it computes, DATA by path).
    steps["evaluate"] = [*remote, "evaluate", root / "test.parquet", "--model", "gauss", "--format", "json"]
    steps["score_missing"] = [*remote, "score", "no_such_table", "--model", "gauss", "--out", root / "none.csv"]
    steps["drop"] = [*remote, "drop", "--model", "multi"]
    steps["models_after_drop"] = [*remote, "models", "--format", "json"]
    steps["unreachable"] = ["--engine", "spark", "--remote", f"sc://127.0.0.1:{_closed_port()}", "models"]
    steps["not_a_connect_url"] = ["--engine", "spark", "--remote", "http://127.0.0.1:15002", "models"]
    steps["no_client"] = [*remote, "models"]
    steps["remote_and_master"] = [*remote, "--master", "local[1]", "models"]
    steps["remote_and_warehouse"] = [*remote, "--warehouse", root / "wh", "models"]
    steps["master_not_a_url"] = ["--engine", "spark", "--master", "foo://bar", "models"]
    steps["master_is_a_remote"] = ["--engine", "spark", "--master", server, "models"]
    steps["master_spark_rejects"] = ["--engine", "spark", "--master", "local[x]", "models"]
    for step, args in steps.items():
        env = {"PYTHONPATH": str(root / "no_grpc")} if step == "no_client" else None
        out[step] = cli(*args, env=env)
    return out


def _ok(result):
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def test_fits_over_connect_are_quiet(runs):
    for name in MODELS:
        fit = _ok(runs[f"fit_{name}"])
        # Not a terminal: no summary, no progress bar, no log line of the client or gRPC.
        assert (fit.stdout, fit.stderr) == ("", ""), name


def test_the_server_keeps_the_models(runs):
    assert_error(runs["fit_again"], "model 'gauss' already exists", "pass --replace")
    listed = json.loads(_ok(runs["models"]).stdout)
    assert [(m["name"], m["kind"], m["features"]) for m in listed] == [("gauss", "naive_bayes", 2),
                                                                        ("multi", "naive_bayes", 4)]
    shown = json.loads(_ok(runs["show"]).stdout)
    assert shown["label"] == "y" and [f["name"] for f in shown["features"]] == ["c0", "c1", "c2", "c3"]
    assert {f["kind"] for f in shown["features"]} == {"multinomial"}
    assert runs["show"].stderr == ""


@pytest.mark.parametrize("name", list(MODELS))
def test_scores_over_connect_are_the_probabilities_of_duckdb(runs, name):
    score = _ok(runs[f"score_{name}"])
    assert (score.stdout, score.stderr) == ("", "")
    train, test, options = MODELS[name]
    root = runs["root"]
    got = pq.read_table(root / f"scored_{name}.parquet")
    kind, features = options[1], options[3].split(",")
    model = sqlnb.fit(str(root / train), "y", kind=kind, features=features)
    want = model.score(str(root / test), keep=["id"]).to_arrow_table()
    assert got["id"].to_pylist() == want["id"].to_pylist() == list(range(len(want)))  # --key id
    assert got["prediction"].to_pylist() == want["prediction"].to_pylist()
    assert model.proba_columns() == [c for c in got.column_names if c.startswith("proba_")]
    for c in model.proba_columns():
        np.testing.assert_allclose(got[c].to_numpy(), want[c].to_numpy(), rtol=0, atol=TOL, err_msg=c)


def test_evaluate_with_a_model_on_the_server_gives_the_metrics_of_duckdb(runs, tmp_path):
    got = json.loads(_ok(runs["evaluate"]).stdout)
    assert runs["evaluate"].stderr == ""
    root = runs["root"]
    sqlnb.fit(str(root / "train.parquet"), "y", kind="gaussian", features=["x", "z"]).save(str(tmp_path / "m.duckdb"),
                                                                                         "gauss")
    want = json.loads(invoke("evaluate", root / "test.parquet", "--model", f"{tmp_path}/m.duckdb:gauss",
                             "--format", "json").stdout)
    assert (got["rows"], got["accuracy"]) == (want["rows"], want["accuracy"])
    # Counts and labels exactly; ranking figures within TOL: DuckDB sums the average precision
    # in numpy over sorted scores, Spark in SQL over groups (the last bit may differ).
    assert [sorted(c) for c in got["per_class"]] == [sorted(c) for c in want["per_class"]]
    for g, w in zip(got["per_class"], want["per_class"]):
        for k, v in w.items():
            if isinstance(v, float):
                assert abs(g[k] - v) <= TOL, (w["label"], k)
            else:
                assert g[k] == v, (w["label"], k)
    for metric in ("log_loss", "brier", "macro_f1"):
        assert abs(got[metric] - want[metric]) <= TOL, metric


def test_an_engine_error_over_connect_is_one_line(runs):
    assert_error(runs["score_missing"], "'no_such_table' not found in the Spark catalog")
    assert not (runs["root"] / "none.csv").exists()


def test_drop_over_connect(runs):
    assert _ok(runs["drop"]).stdout == ""
    assert [m["name"] for m in json.loads(_ok(runs["models_after_drop"]).stdout)] == ["gauss"]


def test_bad_urls_are_one_error_line(runs):
    assert_error(runs["unreachable"], "cannot connect to a Spark Connect server at sc://127.0.0.1:",
                 "that the server is running")
    assert_error(runs["not_a_connect_url"], "'http://127.0.0.1:15002' is not a Spark Connect URL",
                 "must start with 'sc://'")
    assert_error(runs["remote_and_master"], "--master and --remote are two ways to reach Spark; give one")
    assert_error(runs["remote_and_warehouse"], "a Spark Connect server (--remote) keeps its own")
    assert_error(runs["master_not_a_url"], "'foo://bar' is not a Spark master URL", "spark://HOST:7077")
    assert_error(runs["master_is_a_remote"], "is not a Spark master URL", "a Spark Connect URL (sc://) is a remote", "--remote")
    assert_error(runs["master_spark_rejects"], "Spark did not start: Could not parse Master URL: 'local[x]'")
    for step in ("unreachable", "not_a_connect_url", "master_spark_rejects"):
        assert runs[step].returncode == EXIT_USAGE


def test_a_missing_connect_client_is_one_error_line(runs):
    assert_error(runs["no_client"], "Spark Connect needs pyspark's Connect client",
                 "pip install 'sqlnb[spark-connect]'", "grpc")


def test_the_python_api_over_connect(server, tmp_path):
    """``engines.connect("spark", remote=...)``: fit on an Arrow table (sent to the server),
    save, load and score there (a lazy Connect DataFrame); close() releases this client's
    session only, and the server goes on serving."""
    from sqlnb import engines

    train, test = mixed_table(120, seed=5, nulls=False), mixed_table(30, seed=6, nulls=False)
    engine = engines.connect("spark", remote=server, quiet=True)
    try:
        assert engine.connect
        model = sqlnb.fit(train, "y", con=engine, features=["x", "color", "flag"])
        model.save(engine, "api_nb")
        loaded = sqlnb.load(engine, "api_nb")
        scored = loaded.score(test, con=engine, keep=["id"], key="id")
        assert type(scored).__module__.startswith("pyspark.sql.connect")
        got = scored.toArrow()
        assert "api_nb" in [m["name"] for m in sqlnb.list_models(engine)]
        sqlnb.drop(engine, "api_nb")
        assert "api_nb" not in [m["name"] for m in sqlnb.list_models(engine)]
    finally:
        engine.close()
    assert engine.spark.is_stopped
    want = sqlnb.fit(train, "y", features=["x", "color", "flag"]).score(test, keep=["id"]).to_arrow_table()
    assert got["id"].to_pylist() == want["id"].to_pylist()
    assert got["prediction"].to_pylist() == want["prediction"].to_pylist()
    for c in model.proba_columns():
        np.testing.assert_allclose(got[c].to_numpy(), want[c].to_numpy(), rtol=0, atol=TOL, err_msg=c)
    again = engines.connect("spark", remote=server)  # the server still serves
    try:
        assert again.execute(exp.select(exp.Literal.number(1))) == [(1,)]
    finally:
        again.close()


def test_a_silent_server_is_one_error_after_the_timeout(monkeypatch):
    """A port that takes the connection and never speaks (as behind a firewall that drops
    packets, where pyspark's own retries would take minutes): an error after
    CONNECT_TIMEOUT, whose message leaves out the URL's parameters (a token)."""
    from sqlnb import engines
    from sqlnb.engines import spark as spark_engine
    from sqlnb.errors import SqlnbError

    monkeypatch.setattr(spark_engine, "CONNECT_TIMEOUT", 1.0)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel completes the handshake; nothing ever answers
        port = silent.getsockname()[1]
        with pytest.raises(SqlnbError) as raised:
            engines.connect("spark", remote=f"sc://127.0.0.1:{port}/;token=secret", quiet=True)
    assert str(raised.value) == (f"no Spark Connect server answered at sc://127.0.0.1:{port}/ within 1 s; "
                                 "check the host and port")
