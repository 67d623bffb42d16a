"""A fit of a structure built on pair counts (TAN, AODE, KDB) that cannot gather them says so
in one line naming what was asked, not 'tan' whatever the structure."""

import duckdb
import pytest

import sqlnb
from sqlnb.errors import SqlnbError


@pytest.mark.parametrize("structure", ["tan", "aode", "kdb:1", "kdb:2"])
def test_too_few_discrete_features_names_the_paired_structures(structure):
    con = duckdb.connect()
    rel = con.sql("SELECT CASE WHEN range % 3 = 0 THEN 'a' ELSE 'b' END AS y, "
                  "CASE WHEN range % 2 = 0 THEN 'u' ELSE 'v' END AS colour, range * 0.5 % 7 AS x FROM range(60)")
    with pytest.raises(SqlnbError) as e:
        sqlnb.fit(rel, label="y", structure=structure, features=["colour", "x"])
    text = str(e.value)
    assert "\n" not in text and "at least two discrete features" in text
    assert "structure 'tan'" not in text and "(tan, aode, kdb:K)" in text
