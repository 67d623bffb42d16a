"""Values in a CSV file that the fitted model does not expect, as a user meets them:

(a) a CSV value that does not cast to a categorical column fitted as numbers is an unseen
    category (README), and a value that is not a number in a numeric column is one error
    line naming the file, line, column and value;
(b) a costs CSV (and a ``--stop-words @FILE``) saved with a UTF-8 byte-order mark is read.

Values read with the fitted type exactly are in tests/test_fitted_types.py.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

import sqlnb
from support.cli import assert_error, csv_rows, invoke, run_process

BOM = "\ufeff"


# -- (a) values that do not cast ----------------------------------------------------------

TRAIN = "color,size,y\n" + "".join(f"{c},{s},{y}\n" for c, s, y in [
    (1, 1.5, "a"), (2, 2.5, "b"), (1, 1.0, "a"), (3, 3.0, "b"), (2, 2.2, "a"), (1, 0.5, "b"), (3, 2.8, "b")])


@pytest.fixture(scope="module")
def categorical_model(tmp_path_factory):
    """``color`` (integers, so fitted as BIGINT) categorical, ``size`` Gaussian."""
    d = tmp_path_factory.mktemp("cast")
    (d / "train.csv").write_text(TRAIN)
    model = f"{d}/m.duckdb:c"
    fit = invoke("fit", d / "train.csv", "--label", "y", "--feature-kind", "color=categorical", "--model", model)
    assert fit.exit_code == 0, fit.stderr
    assert sqlnb.load(str(d / "m.duckdb"), "c").column_types()["color"] == "BIGINT"
    return d, model


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_cli_score_reads_a_text_value_of_an_integer_category_as_unseen(categorical_model):
    d, model = categorical_model
    # Line 4 holds "x"; line 6 the same size with color missing: the two must score alike.
    (d / "test.csv").write_text("color,size,y\n1,1.5,a\n2,2.0,b\nx,1.2,a\n07,1.1,a\n,1.2,b\n")
    score = run_process("score", d / "test.csv", "--model", model, "--keep", "color", "--out", "-", module=True)
    assert score.returncode == 0, score.stderr
    rows = csv_rows(score.stdout)
    assert [r["color"] for r in rows] == ["1", "2", "x", "07", ""]
    assert rows[2]["prediction"] and float(rows[2]["proba_a"]) == pytest.approx(float(rows[4]["proba_a"]), abs=1e-12)
    # "07" still reads as the category 7 would: here 7 is unseen too, but 1 (line 2) is seen.
    assert "color 2 of 4" in score.stderr and "Error" not in score.stderr
    ev = invoke("evaluate", d / "test.csv", "--model", model, "--format", "json")
    assert ev.exit_code == 0 and '"rows": 5' in ev.stdout, ev.stderr


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_cli_score_unseen_text_past_the_sniffed_rows_and_the_exported_sql(categorical_model):
    """The sniffer reads the first 20,480 rows: "x" after them, in a column it guessed
    BIGINT, is unseen too, in ``score`` and in the SQL ``sql DATA`` exports."""
    d, model = categorical_model
    rng = np.random.default_rng(3)
    n = 21_000
    body = "".join(f"{c},{s:.3f}\n" for c, s in zip(rng.integers(1, 4, n), rng.random(n) * 3))
    (d / "big.csv").write_text("color,size\n" + body + "x,1.2\n,1.2\n")
    score = run_process("score", d / "big.csv", "--model", model, "--out", "-", module=True)
    assert score.returncode == 0, score.stderr
    rows = csv_rows(score.stdout)
    assert len(rows) == n + 2 and rows[-2]["color"] == "x"
    assert float(rows[-2]["proba_a"]) == pytest.approx(float(rows[-1]["proba_a"]), abs=1e-12)
    exported = invoke("sql", d / "big.csv", "--model", model, "--compact")
    assert exported.exit_code == 0, exported.stderr
    got = duckdb.connect().sql(exported.stdout).fetchall()
    assert len(got) == n + 2 and got[-2][0] == "x"
    assert got[-2][2] == pytest.approx(float(rows[-2]["proba_a"]), abs=1e-12)


def test_python_score_reads_a_text_value_of_an_integer_category_as_unseen(categorical_model):
    d, _ = categorical_model
    (d / "py.csv").write_text("color,size\n1,1.5\n3,2.0\nx,0.7\n,0.7\n")
    m = sqlnb.load(str(d / "m.duckdb"), "c")
    got = m.score(str(d / "py.csv"), outputs=("proba", "prediction")).fetchall()
    assert [g[0] for g in got] == ["1", "3", "x", None]
    assert got[2][2:4] == pytest.approx(got[3][2:4], abs=1e-12) and got[2][4] == got[3][4]


def test_cli_non_number_in_a_numeric_column_is_one_line_naming_it(categorical_model):
    d, model = categorical_model
    (d / "bad.csv").write_text("color,size\n1,1.5\n2,2.0\n3,1.1\n2,abc\n")
    result = run_process("score", d / "bad.csv", "--model", model, "--out", "-", module=True)
    line = assert_error(result, "bad.csv'", "line 5", "'size'", "'abc'", "DOUBLE", "--null-string", code=2)
    assert "CSV Error on Line" not in line
    # The fix the line names works.
    fixed = invoke("score", d / "bad.csv", "--model", model, "--null-string", "abc", "--out", "-")
    assert fixed.exit_code == 0 and len(csv_rows(fixed.stdout)) == 4, fixed.stderr


# -- (b) byte-order marks -----------------------------------------------------------------

@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_costs_csv_with_a_byte_order_mark(categorical_model, tmp_path):
    d, model = categorical_model
    plain, marked = tmp_path / "costs.csv", tmp_path / "costs_bom.csv"
    text = "actual,predicted,cost\nb,a,9\n"
    plain.write_text(text, encoding="utf-8")
    marked.write_text(BOM + text, encoding="utf-8")
    assert marked.read_bytes().startswith(b"\xef\xbb\xbf")
    (d / "costs_test.csv").write_text("color,size\n1,1.5\n2,2.0\n3,2.9\n1,0.6\n")
    with_bom = run_process("score", d / "costs_test.csv", "--model", model, "--costs", marked, "--out", "-",
                           module=True)
    assert with_bom.returncode == 0, with_bom.stderr
    without = invoke("score", d / "costs_test.csv", "--model", model, "--costs", plain, "--out", "-")
    assert with_bom.stdout == without.stdout and "expected_cost" in without.stdout
    copy = f"{tmp_path}/m.duckdb:c"
    assert invoke("fit", d / "train.csv", "--label", "y", "--feature-kind", "color=categorical",
                  "--model", copy).exit_code == 0
    decided = invoke("decide", "--model", copy, "--costs", marked)
    assert decided.exit_code == 0, decided.stderr
    assert sqlnb.load(str(tmp_path / "m.duckdb"), "c").decision.costs[1][0] == 9.0


def test_stop_words_file_with_a_byte_order_mark(tmp_path):
    (tmp_path / "docs.csv").write_text("label,body\nspam,the cheap pills\nham,the meeting agenda\n"
                                       "spam,the cheap offer\nham,the agenda now\n")
    (tmp_path / "stop.txt").write_text(BOM + "the\nnow\n", encoding="utf-8")
    r = invoke("fit", tmp_path / "docs.csv", "--label", "label", "--feature-kind", "body=multinomial",
               "--stop-words", f"@{tmp_path}/stop.txt", "--model", f"{tmp_path}/m.duckdb:t")
    assert r.exit_code == 0, r.stderr
    m = sqlnb.load(str(tmp_path / "m.duckdb"), "t")
    stop = m.features[0].bag.get("stop_words") or m.features[0].bag["text"]["stop_words"]
    assert sorted(stop) == ["now", "the"]


# -- (c) explanations under a decision rule -----------------------------------------------
