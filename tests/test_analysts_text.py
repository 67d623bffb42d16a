"""A free-text column: a table of (topic, body) sentences fitted with
no options fails in one line naming the screened column and the option that keeps it
(``--feature-kind body=multinomial``); with that option it fits a token bag."""

from __future__ import annotations

import random

import duckdb
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from support.cli import assert_error, invoke

TOPICS = {"sport": ["match", "goal", "team", "coach", "league", "player"],
          "tech": ["chip", "software", "cloud", "model", "server", "code"],
          "food": ["recipe", "bake", "flour", "taste", "dinner", "oven"]}
COMMON = ["the", "a", "today", "new", "big", "said", "after", "week"]


@pytest.fixture()
def news(tmp_path):
    """``news.duckdb``, table ``news(topic, body)``: 240 sentences, every body different."""
    rng = random.Random(1)
    rows = []
    for i in range(240):
        topic = rng.choice(sorted(TOPICS))
        words = [rng.choice(TOPICS[topic] if rng.random() < 0.5 else COMMON) for _ in range(rng.randint(6, 14))]
        rows.append((topic, f"{' '.join(words)} {i}"))
    db = tmp_path / "news.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE news (topic VARCHAR, body VARCHAR)")
        con.executemany("INSERT INTO news VALUES (?, ?)", rows)
    return db


def test_fit_with_no_options_names_the_text_column_and_the_option(news, tmp_path):
    model = f"{tmp_path}/m.duckdb:news"
    line = assert_error(invoke("fit", f"{news}:news", "--label", "topic", "--model", model),
                        "'body'", "--feature-kind body=multinomial", "--keep-columns body")
    assert "no feature column besides the label" in line
    assert_error(invoke("cv", f"{news}:news", "--label", "topic"), "'body'", "--feature-kind body=multinomial")
    with duckdb.connect(str(news), read_only=True) as con, pytest.raises(SqlnbError, match="feature_kinds=.'body'"):
        sqlnb.fit(con.table("news"), "topic", con=con)


def test_the_option_the_error_names_fits_a_token_bag(news, tmp_path):
    model = f"{tmp_path}/m.duckdb:news"
    r = invoke("fit", f"{news}:news", "--label", "topic", "--feature-kind", "body=multinomial", "--model", model)
    assert r.exit_code == 0, r.stderr
    m = sqlnb.load(f"{tmp_path}/m.duckdb", "news")
    assert [(f.name, f.kind) for f in m.features] == [("body", "multinomial")]
    ev = invoke("evaluate", f"{news}:news", "--model", model, "--format", "json")
    assert ev.exit_code == 0 and '"accuracy": ' in ev.stdout
    assert float(ev.stdout.split('"accuracy": ')[1].split(",")[0]) > 0.8


def test_a_text_column_beside_other_features_is_left_out_with_a_note_as_before(news, tmp_path):
    """Only a fit left with no feature fails: with another feature, the text column is
    left out with its note, as screening always did."""
    with duckdb.connect(str(news)) as con:
        con.execute("ALTER TABLE news ADD COLUMN n DOUBLE")
        con.execute("UPDATE news SET n = length(body)")
    r = invoke("fit", f"{news}:news", "--label", "topic", "--model", f"{tmp_path}/m.duckdb:news")
    assert r.exit_code == 0 and "note: left out column 'body'" in r.stderr, r.stderr
