"""Headerless files: ``--names a,b,c`` names the columns of a file
without a header (its first line is a row; ``--columns`` types them by those names), and
a first line that DuckDB's sniffer takes for a header but that looks like data is said on
stderr (never a silently lost row)."""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import duckdb
import pytest

import sqlnb
from sqlnb.source import Files, resolve
from support import shared_data as sd
from support.cli import assert_error, invoke

CAR = ["buying", "maint", "doors", "persons", "lug_boot", "safety", "class"]
VOTES = sd.DATA_DIR / "votes" / "house-votes-84.data"
MUSHROOM = sd.DATA_DIR / "mushroom" / "agaricus-lepiota.data"
WARNING = "warning: the first line of"


@pytest.fixture()
def cars(tmp_path) -> Path:
    """A headerless all-text CSV shaped like UCI car.data: 6 categorical columns and the
    class, 1,728 rows (every combination), first line ``vhigh,vhigh,2,2,small,low,unacc``."""
    values = [["vhigh", "high", "med", "low"], ["vhigh", "high", "med", "low"], ["2", "3", "4", "5more"],
              ["2", "4", "more"], ["small", "med", "big"], ["low", "med", "high"]]
    rng = random.Random(0)
    path = tmp_path / "car.data"
    with path.open("w") as f:
        for combo in itertools.product(*values):
            label = "unacc" if combo[5] == "low" else rng.choice(["unacc", "acc", "good", "vgood"])
            f.write(",".join(combo) + f",{label}\n")
    return path


def _rows(model: str) -> int:
    db, name = model.rsplit(":", 1)
    return sqlnb.load(db, name).report["rows"]


def test_a_headerless_all_text_csv_warns_when_its_first_row_is_taken_for_a_header(cars, tmp_path):
    model = f"{tmp_path}/m.duckdb:car"
    r = invoke("fit", cars, "--data-format", "csv", "--label", "unacc", "--model", model)
    assert r.exit_code == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if line.startswith(WARNING)]
    assert len(warned) == 1, r.stderr
    assert "'vhigh'" in warned[0] and "--names" in warned[0] and "--no-header" in warned[0]
    assert _rows(model) == 1727  # the row read as the header is said, not silent
    # --header says the first line is one: no warning
    r = invoke("fit", cars, "--data-format", "csv", "--header", "--label", "unacc", "--model", model, "--replace")
    assert r.exit_code == 0 and WARNING not in r.stderr, r.stderr


def test_names_keep_every_row_and_columns_type_them(cars, tmp_path):
    model = f"{tmp_path}/m.duckdb:car"
    r = invoke("fit", cars, "--data-format", "csv", "--names", ",".join(CAR), "--label", "class", "--model", model)
    assert r.exit_code == 0 and WARNING not in r.stderr, r.stderr
    assert _rows(model) == 1728
    m = sqlnb.load(f"{tmp_path}/m.duckdb", "car")
    assert [f.name for f in m.features] == CAR[:-1] and all(f.kind == "categorical" for f in m.features)
    # every row is scored, the first one included, with the same reading options
    scored = invoke("score", cars, "--data-format", "csv", "--names", ",".join(CAR), "--model", model,
                    "--keep", "buying", "--no-proba", "--out", "-")
    assert scored.exit_code == 0, scored.stderr
    assert scored.stdout.count("\n") == 1729 and scored.stdout.splitlines()[1].startswith("vhigh,")
    # --no-header keeps every row too (columns column0, ...)
    r = invoke("fit", cars, "--data-format", "csv", "--no-header", "--label", "column6", "--model", model,
               "--replace")
    assert r.exit_code == 0 and WARNING not in r.stderr and _rows(model) == 1728, r.stderr

    # --columns applies to the names: a headerless file of numeric codes, one read as text
    codes = tmp_path / "codes.csv"
    codes.write_text("".join(f"{i % 3},{(i * 7) % 5},{'ab'[i % 2]}\n" for i in range(60)))
    r = invoke("fit", codes, "--names", "a,b,y", "--columns", "a=VARCHAR", "--label", "y", "--model",
               f"{tmp_path}/m.duckdb:codes")
    assert r.exit_code == 0, r.stderr
    kinds = {f.name: (f.kind, f.sql_type) for f in sqlnb.load(f"{tmp_path}/m.duckdb", "codes").features}
    assert kinds == {"a": ("categorical", "VARCHAR"), "b": ("gaussian", "BIGINT")}
    assert _rows(f"{tmp_path}/m.duckdb:codes") == 60


def test_names_that_do_not_fit_the_file_are_one_line(cars, tmp_path):
    model = f"{tmp_path}/m.duckdb:car"
    assert_error(invoke("fit", cars, "--data-format", "csv", "--names", "a,b,c", "--label", "c", "--model", model),
                 "--names gives 3 names", "has 7 columns")
    assert_error(invoke("fit", cars, "--data-format", "csv", "--names", "a,b,c,d,e,f,g,h", "--label", "c",
                        "--model", model), "--names gives 8 names", "has 7 columns")
    assert_error(invoke("fit", cars, "--data-format", "csv", "--names", "a,b,c,d,e,a,g", "--label", "g",
                        "--model", model), "'a' twice")
    assert_error(invoke("fit", cars, "--data-format", "csv", "--names", "", "--label", "c", "--model", model),
                 "--names takes")
    assert not os.path.exists(f"{tmp_path}/m.duckdb")


def test_a_real_header_is_not_warned_about(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("color,size,y\n" + "".join(f"{c},{s},{y}\n" for c, s, y in
                                               [("red", 1, "a"), ("blue", 2, "b"), ("green", 3, "a")] * 10))
    r = invoke("fit", path, "--label", "y", "--model", f"{tmp_path}/m.duckdb:t")
    assert r.exit_code == 0 and WARNING not in r.stderr, r.stderr


def test_a_header_of_numbers_and_booleans_is_data_like(tmp_path):
    """The second half of the rule, on the function itself: DuckDB's sniffer reads such a
    first line as a row when the columns are numbers, so it is checked on a file whose
    columns it had named after that line."""
    from sqlnb.source import header_looks_like_data
    path = tmp_path / "n.csv"
    path.write_text("10,20,yes\nfoo,bar,baz\nqux,quux,x\n")
    con = duckdb.connect()
    spec = Files(str(path), "csv")
    assert header_looks_like_data(spec, {"10": "VARCHAR", "20": "VARCHAR", "yes": "VARCHAR"}, con) == \
        "every field of it is a number or a boolean"
    assert header_looks_like_data(spec, {"column0": "VARCHAR", "column1": "VARCHAR", "column2": "VARCHAR"},
                                  con) is None
    assert list(resolve(Files(str(path), "csv", {"names": ["p", "q", "r"], "header": False}), con).columns) == \
        ["p", "q", "r"]


def _shared(path: Path) -> None:
    sd.require_shared_data(path.parent.name)


def test_the_real_headerless_votes_file_warns_or_keeps_every_row(tmp_path):
    """house-votes-84.data (435 rows, no header): DuckDB takes its first row for a header
    (``republican,n,y,n,...``); that is said, and --names reads all 435 rows."""
    _shared(VOTES)
    model = f"{tmp_path}/m.duckdb:votes"
    r = invoke("fit", VOTES, "--data-format", "csv", "--label", "republican", "--model", model)
    assert r.exit_code == 0, r.stderr
    assert _rows(model) == 434 and f"{WARNING} {str(VOTES)!r}" in r.stderr and "'republican'" in r.stderr
    names = list(sd.VOTES_COLUMNS)
    r = invoke("fit", VOTES, "--data-format", "csv", "--names", ",".join(names), "--null-string", "?",
               "--label", "party", "--model", model, "--replace")
    assert r.exit_code == 0 and WARNING not in r.stderr, r.stderr
    assert _rows(model) == 435


def test_the_real_mushroom_file_is_read_without_a_header_and_not_warned_about(tmp_path):
    _shared(MUSHROOM)
    model = f"{tmp_path}/m.duckdb:mush"
    r = invoke("fit", MUSHROOM, "--data-format", "csv", "--label", "column00", "--model", model)
    assert r.exit_code == 0 and WARNING not in r.stderr, r.stderr
    assert _rows(model) == 8124
