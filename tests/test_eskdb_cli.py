"""The ensemble of selective KDBs (``--structure eskdb``) on the command line.

A model fitted by ``sqlnb fit --structure eskdb`` (the default number of members, on a few
hundred generated rows of correlated discrete features with NULLs) is shown by ``show``
(each member's k, s, leave-one-out figures and kept features), ``show --params`` and its
JSON (every member's ranking, ranked parents, k, s and m's, those of
``NaiveBayes.eskdb_summary``); ``score``, ``evaluate`` and ``sql --dialect sqlite`` give the
Python model's probabilities; ``sql --fit`` names the scan it leaves out; ``--explain`` and
``select`` refuse it in one line each; ``cv --grid structure=eskdb,skdb`` compares it with
skdb; the help of ``--structure`` and ``--backoff`` names it. Its numerics against an
independent oracle are another file's (``test_eskdb.py``).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.cli import train
from sqlnb.models.naive_bayes import eskdb
from sqlnb.workflows.report import ensemble_text
from support.cli import assert_error, csv_rows, invoke, run_process
from support.structured import DISCRETE, class_scores, kdb_table, registered, sqlite_input

TOL = 1e-12
#: The label and the discrete features, each of its kind.
ARGS = ["--label", "y", "--features", ",".join(DISCRETE), "--feature-kind",
        ",".join(f"{k}={v}" for k, v in DISCRETE.items())]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """``train.parquet`` (500 rows), ``test.parquet`` (200 rows, unseen values) and
    ``m.duckdb:esk``, fitted by a real ``sqlnb fit --structure eskdb:3`` process."""
    d = tmp_path_factory.mktemp("eskdb")
    train_rows, test_rows = kdb_table(500, 5), kdb_table(200, 6, unseen=True)
    pq.write_table(train_rows, d / "train.parquet")
    pq.write_table(test_rows, d / "test.parquet")
    r = run_process("fit", d / "train.parquet", *ARGS, "--structure", "eskdb:3", "--model", f"{d}/m.duckdb:esk")
    assert r.returncode == 0, r.stderr
    return d, sqlnb.load(str(d / "m.duckdb"), "esk"), train_rows, test_rows


def test_show_prints_every_members_choice(fitted):
    d, model, _, _ = fitted
    r = invoke("show", "--model", f"{d}/m.duckdb:esk")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("eskdb "))
    assert lines[at].startswith(f"eskdb        {eskdb.MEMBERS} members, each a selective KDB (k <= 3)")
    members = model.eskdb_summary()["members"]
    assert len(members) == eskdb.MEMBERS
    for t, m in enumerate(members):
        cells = lines[at + 2 + t].split()
        assert cells[:5] == [str(t), str(m["k"]), str(m["s"]), f"{m['rmse']:.4f}", f"{m['zero_one']:.4f}"]
        assert " ".join(cells[5:]) == ", ".join(m["order"][:m["s"]])  # five features: all shown
    assert len({tuple(m["order"]) for m in members}) > 1


def test_show_params_give_every_members_ranking_parents_and_m(fitted):
    d, model, _, _ = fitted
    summary = model.eskdb_summary()
    r = invoke("show", "--params", "--format", "json", "--model", f"{d}/m.duckdb:esk")
    assert r.exit_code == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["parameters"]["eskdb"] == json.loads(json.dumps(summary))
    assert got["eskdb"] == got["parameters"]["eskdb"]
    for m, net in zip(summary["members"], model._ens.nets):
        assert m["order"] == net.order and (m["k"], m["s"]) == (net.k, net.s)
        assert m["backoff"] == net.choice["backoff"]
        for child in net.order[:net.s]:  # the parents each kept feature uses: its list's first k
            used = net.parent.get(child, ())
            assert m["parents"][child][:net.k] == ([used] if isinstance(used, str) else list(used))
    r = invoke("show", "--params", "--model", f"{d}/m.duckdb:esk")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"eskdb: {eskdb.MEMBERS} members"))
    rows = [line.split(None, 5) for line in lines[at + 2:at + 2 + eskdb.MEMBERS * len(DISCRETE)]]
    expected = [[str(t), str(m["k"]), str(m["s"]), str(r + 1), name]
                for t, m in enumerate(summary["members"]) for r, name in enumerate(m["order"])]
    assert [row[:5] for row in rows] == expected
    last = summary["members"][-1]
    name = last["order"][-1]
    assert lines[at + 1 + eskdb.MEMBERS * len(DISCRETE)].split(None, 5)[5].split() == (
        (["(past s)"] if last["s"] < len(last["order"]) else [])
        + ", ".join(last["parents"][name]).split() + ", ".join(f"{v:g}" for v in last["backoff"][name]).split())


def test_score_evaluate_and_sqlite_export_are_the_python_models(fitted):
    d, model, train_rows, test_rows = fitted
    con, _, _ = registered(train_rows, test_rows)
    want = class_scores(model, "test", con, "proba")
    r = invoke("score", d / "test.parquet", "--model", f"{d}/m.duckdb:esk", "--keep", "rid", "--outputs", "proba")
    assert r.exit_code == 0, r.stderr
    rows = csv_rows(r.stdout)
    assert [int(row["rid"]) for row in rows] == test_rows["rid"].to_pylist()
    got = np.array([[float(row[f"proba_{c}"]) for c in model.classes] for row in rows])
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
    r = invoke("evaluate", d / "test.parquet", "--model", f"{d}/m.duckdb:esk", "--format", "json")
    assert r.exit_code == 0, r.stderr
    pred = model.score("test", con=con, outputs=("prediction",), keep=["y"]).fetchall()
    labelled = [(a, b) for a, b in pred if a is not None]
    assert abs(json.loads(r.stdout)["accuracy"] - sum(a == b for a, b in labelled) / len(labelled)) < TOL
    r = invoke("sql", "--model", f"{d}/m.duckdb:esk", "--dialect", "sqlite", "--source", "input", "--key", "rid",
               "--outputs", "proba")
    assert r.exit_code == 0, r.stderr
    got = np.array([row[-len(model.classes):] for row in sqlite_input(test_rows).execute(r.stdout).fetchall()],
                   dtype=float)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_sql_fit_names_the_patterns_scan_it_leaves_out(fitted):
    d, _, _, _ = fitted
    r = invoke("sql", "--fit", "--model", f"{d}/m.duckdb:esk")
    assert r.exit_code == 0, r.stderr
    assert ("note: the eskdb:3 model's members count their parents from its training rows as patterns, which come "
            "from one more scan that this SQL leaves out (sqlnb fit runs it)") in r.stderr


def test_explain_and_select_are_refused_in_one_line(fitted):
    d, _, _, _ = fitted
    for command in (["score", d / "test.parquet"], ["sql"]):
        assert_error(invoke(*command, "--model", f"{d}/m.duckdb:esk", "--explain", "2"),
                     "explain: structure 'eskdb:3' averages probabilities", "no per-feature breakdown")
    assert_error(invoke("select", d / "train.parquet", *ARGS, "--structure", "eskdb", "--folds", "3",
                        "--model", f"{d}/m.duckdb:sel"),
                 "feature selection around eskdb: eskdb chooses its features itself", "select around kdb:K")
    assert_error(invoke("fit", d / "train.parquet", *ARGS, "--structure", "eskdb:6",
                        "--model", f"{d}/m.duckdb:bad"), "unknown structure 'eskdb:6'", "eskdb or eskdb:K")


def test_cv_grid_compares_eskdb_with_skdb(fitted):
    """The command's fold figures are :func:`sqlnb.cross_validate`'s on the same rows."""
    d, _, train_rows, _ = fitted
    r = invoke("cv", d / "train.parquet", *ARGS, "--folds", "3",
               "--grid", "structure=eskdb:2,skdb:2", "--format", "json")
    assert r.exit_code == 0, r.stderr
    got = {p["params"]["structure"]: p for p in json.loads(r.stdout)["results"]}
    con, _, _ = registered(train_rows, train_rows)
    want = sqlnb.cross_validate("train", "y", con=con, folds=3, features=list(DISCRETE), feature_kinds=DISCRETE,
                                grid={"structure": ["eskdb:2", "skdb:2"]}, refit=False)
    assert set(got) == {"eskdb:2", "skdb:2"}
    for point in want.results:
        s = point["params"]["structure"]
        np.testing.assert_allclose(got[s]["log_loss"], point["log_loss"], rtol=0, atol=TOL)
        np.testing.assert_allclose(got[s]["accuracy"], point["accuracy"], rtol=0, atol=TOL)


def test_fit_summary_and_help_name_the_ensemble(fitted):
    _, model, _, _ = fitted
    members = model.eskdb_summary()["members"]
    ks, ss = sorted({m["k"] for m in members}), sorted({m["s"] for m in members})
    span = lambda v: str(v[0]) if len(v) == 1 else f"{v[0]} to {v[-1]}"  # noqa: E731
    assert train._choice(model) == (f"; eskdb's {eskdb.MEMBERS} members chose k = {span(ks)} and s = {span(ss)} of "
                                    f"{len(DISCRETE)} features by leave-one-out (sqlnb show has each member)")
    r = invoke("fit", "--help")
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    assert "skdb[:K]|eskdb[:K]|" in text and f"eskdb or eskdb:K: the mean posterior of {eskdb.MEMBERS} skdb:K" in text
    assert "loo (skdb and eskdb, their default)" in text


def test_show_names_how_many_kept_features_it_leaves_unnamed():
    """Past six kept features a member's row names the first six and counts the rest."""
    member = {"k": 1, "s": 8, "order": [f"f{i}" for i in range(9)], "rmse": 0.25, "zero_one": 0.125}
    lines = ensemble_text({"k_max": 2, "temperature": 2.0, "members": [member]})
    assert lines[0].startswith("eskdb        1 member, each a selective KDB (k <= 2)")
    assert lines[2].split(None, 5) == ["0", "1", "8", "0.2500", "0.1250", "f0, f1, f2, f3, f4, f5, … (2 more)"]
