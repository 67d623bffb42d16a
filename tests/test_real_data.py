"""A user's own CSVs, first time right.

Each test builds the kind of file a new user brings: a customer-ID column, ``yes``/``no``
labels, ``NA`` and empty cells, a scoring batch whose column is entirely empty, a
``.data`` file, standard input, a query as DATA. Every command runs as a user runs it:
``python -m sqlnb`` in its own process.
"""

from __future__ import annotations

import csv
import io
import json

import duckdb
import numpy as np
import pytest

import sqlnb
from support.cli import assert_error, run_process

pytestmark = pytest.mark.slow  # every command a process of its own: 15-30 s a test


def sqlnb_cli(*args, **kwargs):
    """``python -m sqlnb ARGS`` in a subprocess."""
    return run_process(*args, module=True, **kwargs)


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def churn_csv(path, n: int, first_id: int, last_id: int, seed: int) -> None:
    """Customers with a unique ``customer_id`` in signup order, two numeric features, a
    two-value category and a ``yes``/``no`` label. Churners signed up earlier (smaller
    IDs), and the scoring batch's customers are newer than every training one: the ID
    looks informative in training and is out of range at scoring, as real IDs are."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    x1 = rng.normal(np.where(y, 1.5, 0.0), 1.0)
    x2 = rng.normal(np.where(y, -1.0, 0.0), 1.5)
    cat = np.where(rng.random(n) < np.where(y, 0.7, 0.3), "a", "b")
    order = np.argsort(rng.random(n) + np.where(y, 0.0, 0.5))
    ids = np.empty(n, dtype=np.int64)
    ids[order] = first_id + np.arange(n) * ((last_id - first_id) // n)
    with open(path, "w") as f:
        f.write("customer_id,x1,x2,cat,churn\n")
        for i in range(n):
            f.write(f"{ids[i]},{x1[i]:.4f},{x2[i]:.4f},{cat[i]},{'yes' if y[i] else 'no'}\n")


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    d = tmp_path_factory.mktemp("churn")
    churn_csv(d / "train.csv", 3000, 100_000, 130_000, 1)
    churn_csv(d / "test.csv", 1000, 130_000, 140_000, 2)
    return d


def accuracy(model: str, data, *extra) -> float:
    return json.loads(ok(sqlnb_cli("evaluate", data, "--model", model, "--format", "json", *extra)))["accuracy"]


def test_an_id_column_is_left_out_by_default_and_said_so(churn, tmp_path):
    db = tmp_path / "m.duckdb"
    fit = sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", f"{db}:default")
    ok(fit)
    assert "left out column 'customer_id'" in fit.stderr and "like an ID" in fit.stderr
    assert "--keep-columns customer_id" in fit.stderr
    ok(sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", f"{db}:without",
                 "--exclude", "customer_id"))
    ok(sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", f"{db}:with",
                 "--keep-columns", "customer_id"))
    default, without, kept = (accuracy(f"{db}:{m}", churn / "test.csv") for m in ("default", "without", "with"))
    assert abs(default - without) <= 0.01
    assert kept < without - 0.1, "the ID kept as a Gaussian feature costs accuracy (the case screening prevents)"
    shown = json.loads(ok(sqlnb_cli("show", "--model", f"{db}:default", "--format", "json")))
    assert [f["name"] for f in shown["features"]] == ["x1", "x2", "cat"]
    assert shown["trained"]["screened"][0]["column"] == "customer_id"
    text = ok(sqlnb_cli("show", "--model", f"{db}:default"))
    assert "left out     customer_id: a different value in each of the 3,000 rows, like an ID" in text


def test_yes_no_labels_keep_their_text(churn, tmp_path):
    model = f"{tmp_path / 'm.duckdb'}:m"
    ok(sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", model))
    shown = json.loads(ok(sqlnb_cli("show", "--model", model, "--format", "json")))
    assert shown["label_type"] == "VARCHAR"
    assert [c["label"] for c in shown["classes"]] == ["no", "yes"]
    rows = list(csv.DictReader(io.StringIO(ok(sqlnb_cli("score", churn / "test.csv", "--model", model,
                                                        "--keep", "churn", "--out", "-")))))
    assert {r["prediction"] for r in rows} <= {"yes", "no"} and "proba_yes" in rows[0]
    # evaluate compares the labels as text too: the same accuracy as by hand
    hand = np.mean([r["prediction"] == r["churn"] for r in rows])
    assert accuracy(model, churn / "test.csv") == pytest.approx(hand, abs=1e-12)
    # a user who wants booleans says so
    ok(sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", model, "--replace",
                 "--columns", "churn=BOOLEAN"))
    shown = json.loads(ok(sqlnb_cli("show", "--model", model, "--format", "json")))
    assert shown["label_type"] == "BOOLEAN" and [c["label"] for c in shown["classes"]] == [False, True]


def test_null_string_adds_to_empty_cells(tmp_path):
    path = tmp_path / "na.csv"
    rng = np.random.default_rng(3)
    with open(path, "w") as f:
        f.write("age,colour,y\n")
        for i in range(300):
            k = i % 2
            age = "NA" if i % 7 == 0 else ("" if i % 11 == 0 else f"{30 + 10 * k + rng.normal():.2f}")
            colour = "NA" if i % 5 == 0 else ("" if i % 13 == 0 else ["red", "blue"][(k + (i % 3 == 0)) % 2])
            f.write(f"{age},{colour},{'ab'[k]}\n")
    model = f"{tmp_path / 'm.duckdb'}:m"
    ok(sqlnb_cli("fit", path, "--label", "y", "--model", model, "--null-string", "NA"))
    shown = json.loads(ok(sqlnb_cli("show", "--model", model, "--format", "json")))
    features = {f["name"]: f for f in shown["features"]}
    assert features["age"]["kind"] == "gaussian" and features["age"]["type"] == "DOUBLE"
    assert features["colour"]["kind"] == "categorical"
    m = sqlnb.load(str(tmp_path / "m.duckdb"), "m")
    assert sorted(m.stats.features["colour"].values) == ["blue", "red"], "neither '' nor 'NA' is a category"
    con = duckdb.connect()
    rows = con.execute(f"SELECT count(*) FILTER (WHERE age IS NULL), count(*) FILTER (WHERE colour IS NULL) "
                       f"FROM read_csv('{path}', nullstr=['', 'NA'])").fetchall()[0]
    assert m.stats.features["age"].n.sum() == 300 - rows[0]
    assert m.stats.features["colour"].counts.sum() == 300 - rows[1]


def test_an_all_empty_column_in_a_scoring_batch_is_missing(churn, tmp_path):
    model = f"{tmp_path / 'm.duckdb'}:m"
    ok(sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", model))
    batch = tmp_path / "batch.csv"
    with open(churn / "test.csv") as src, open(batch, "w") as out:
        lines = src.read().splitlines()[:6]
        out.write(lines[0] + "\n")
        for line in lines[1:]:
            cells = line.split(",")
            cells[2] = ""  # x2 empty in every row: DuckDB's sniffer calls the column VARCHAR
            out.write(",".join(cells) + "\n")
    assert duckdb.sql(f"SELECT * FROM read_csv('{batch}')").types[2] == "VARCHAR"
    got = list(csv.DictReader(io.StringIO(ok(sqlnb_cli("score", batch, "--model", model, "--out", "-")))))
    assert len(got) == 5
    # the same rows with x2 NULL, scored in Python: x2 contributes no term
    m = sqlnb.load(str(tmp_path / "m.duckdb"), "m")
    rel = duckdb.sql(f"SELECT * REPLACE (CAST(NULL AS DOUBLE) AS x2) FROM read_csv('{churn / 'test.csv'}') LIMIT 5")
    want = m.score(rel.arrow()).fetchall()
    names = m.score(rel.arrow()).columns
    for g, w in zip(got, want):
        w = dict(zip(names, w))
        assert g["prediction"] == w["prediction"]
        assert float(g["proba_yes"]) == pytest.approx(w["proba_yes"], abs=1e-12)


def test_a_data_file_is_read_with_data_format(churn, tmp_path):
    data = tmp_path / "churn.data"
    data.write_bytes((churn / "train.csv").read_bytes())
    model = f"{tmp_path / 'm.duckdb'}:m"
    assert_error(sqlnb_cli("fit", data, "--label", "churn", "--model", model), "churn.data", "--data-format csv")
    ok(sqlnb_cli("fit", data, "--label", "churn", "--model", model, "--data-format", "csv"))
    assert accuracy(model, churn / "test.csv") > 0.8


def test_standard_input_and_a_query_are_data(churn, tmp_path):
    model = f"{tmp_path / 'm.duckdb'}:m"
    text = (churn / "train.csv").read_text()
    fit = sqlnb_cli("fit", "-", "--label", "churn", "--model", model, input=text)
    ok(fit)
    from_file = f"{tmp_path / 'm.duckdb'}:file"
    ok(sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", from_file))
    scored_stdin = ok(sqlnb_cli("score", "-", "--model", model, "--out", "-",
                                input=(churn / "test.csv").read_text()))
    scored_file = ok(sqlnb_cli("score", churn / "test.csv", "--model", from_file, "--out", "-"))
    assert scored_stdin == scored_file and len(scored_file.splitlines()) == 1001
    # DATA as a query: the rows of one category only
    query = f"SELECT * FROM read_csv('{churn / 'train.csv'}') WHERE cat = 'a'"
    ok(sqlnb_cli("fit", query, "--label", "churn", "--model", f"{tmp_path / 'm.duckdb'}:q", "--exclude", "cat"))
    m = sqlnb.load(str(tmp_path / "m.duckdb"), "q")
    n_a = duckdb.sql(f"SELECT count(*) FROM read_csv('{churn / 'train.csv'}') WHERE cat = 'a'").fetchall()[0][0]
    assert m.report["rows"] == n_a
    assert accuracy(f"{tmp_path / 'm.duckdb'}:q",
                    f"SELECT * FROM read_csv('{churn / 'test.csv'}') WHERE cat = 'a'") > 0.7
    assert_error(sqlnb_cli("fit", query, "--label", "churn", "--model", model, "--replace", "--delimiter", ";"),
                 "apply to files")


def test_columns_fix_types_and_keep_leading_zeros(tmp_path):
    path = tmp_path / "zip.csv"
    with open(path, "w") as f:
        f.write("zip,y\n")
        for i in range(200):
            f.write(f"{'0' if i % 2 else ''}{1000 + i % 4},{'ab'[i % 2]}\n")
    model = f"{tmp_path / 'm.duckdb'}:m"
    ok(sqlnb_cli("fit", path, "--label", "y", "--model", model, "--columns", "zip=VARCHAR"))
    m = sqlnb.load(str(tmp_path / "m.duckdb"), "m")
    assert sorted(m.stats.features["zip"].values) == ["01001", "01003", "1000", "1002"]
    assert_error(sqlnb_cli("fit", path, "--label", "y", "--model", model, "--replace", "--columns", "zip=VARCHARR"),
                 "--columns zip=VARCHARR", "not a type")
    # scoring reads the column as the model's text too (an integer reading would lose the zero)
    rows = list(csv.DictReader(io.StringIO(ok(sqlnb_cli("score", path, "--model", model, "--out", "-")))))
    assert [r["zip"] for r in rows[:2]] == ["1000", "01001"]
    assert all(r["prediction"] == r["y"] for r in rows)


# -- provenance and counts users ask for --------------------------------------------------------


def test_show_lists_every_batch_after_update(churn, tmp_path):
    model = f"{tmp_path / 'm.duckdb'}:m"
    ok(sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", model))
    ok(sqlnb_cli("update", churn / "test.csv", "--model", model))
    ok(sqlnb_cli("update", churn / "test.csv", "--model", model, "--decay", "0.5"))
    shown = json.loads(ok(sqlnb_cli("show", "--model", model, "--format", "json")))
    batches = shown["trained"]["batches"]
    assert [(b["rows"], b.get("decay")) for b in batches] == [(3000, None), (1000, None), (1000, 0.5)]
    assert all(b["source"].endswith(("train.csv'", "test.csv'")) and b["at"] for b in batches)
    text = ok(sqlnb_cli("show", "--model", model)).splitlines()
    assert text[2].startswith("trained on   3,000 rows of") and "train.csv" in text[2]
    assert text[3].startswith("updated with 1,000 rows of") and "test.csv" in text[3]
    assert text[4].strip().startswith("1,000 rows of") and text[4].endswith("decay 0.5")
    assert text[5] == "in all       3,000 rows (effective: older rows decayed)"  # (3000 + 1000)·0.5 + 1000


def test_evaluate_names_a_label_it_never_saw_and_counts_unseen_categories(churn, tmp_path):
    model = f"{tmp_path / 'm.duckdb'}:m"
    ok(sqlnb_cli("fit", churn / "train.csv", "--label", "churn", "--model", model))
    test = tmp_path / "test.csv"
    lines = (churn / "test.csv").read_text().splitlines()
    # adult.test's spelling: a trailing '.' on the label; and a tenth of 'cat' unseen
    rows = [lines[0]] + [",".join(c[:3] + (["z"] if i % 10 == 0 else c[3:4]) + [c[4] + "."])
                         for i, c in enumerate(line.split(",") for line in lines[1:])]
    test.write_text("\n".join(rows) + "\n")
    r = sqlnb_cli("evaluate", test, "--model", model)
    out = ok(r)
    assert "rows have a label the model does not know (e.g. 'no.' (nearest class 'no'), 'yes.' (nearest class " \
           "'yes'))" in out
    assert "note: values unseen in training, in the first 10,000 rows (scored as missing): cat 100 of 1,000" \
        in r.stderr
    d = json.loads(ok(sqlnb_cli("evaluate", test, "--model", model, "--format", "json")))
    assert d["unknown_labels"] == ["no.", "yes."]
    assert d["unseen_categories"] == [{"column": "cat", "values": 1000, "unseen": 100, "examples": ["z"],
                                       "nearest": ["b"], "rows_read": 10000}]
    scored = sqlnb_cli("score", test, "--model", model, "--out", "-")
    assert "cat 100 of 1,000" in scored.stderr and len(ok(scored).splitlines()) == 1001


def test_the_fit_summary_counts_rows_without_a_label(tmp_path, monkeypatch):
    import sqlnb.cli as cli_module
    from support.cli import invoke

    path = tmp_path / "t.csv"
    path.write_text("x,y\n" + "".join(f"{i % 7},{'' if i % 10 == 0 else 'ab'[i % 2]}\n" for i in range(100)))
    model = f"{tmp_path / 'm.duckdb'}:m"
    monkeypatch.setattr(cli_module, "stderr_is_terminal", lambda: True)  # the summary is for a terminal
    r = invoke("fit", path, "--label", "y", "--model", model)
    assert r.exit_code == 0, r.stderr
    assert "90 rows (10 with a NULL label skipped), 2 classes" in r.stderr
    shown = ok(sqlnb_cli("show", "--model", model))
    assert "trained on   90 rows of" in shown and "(10 with a NULL label skipped)" in shown
