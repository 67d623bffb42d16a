"""``sqlnb score --outputs`` and ``sqlnb sql --outputs``: each score
group of the Python API on the command line, row for row, and one error line for a bad
name."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.models.finish import OUTPUTS
from support.cli import assert_error, fitted_dir, invoke, snapshot


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    return fitted_dir(tmp_path_factory.mktemp("outputs"), 200, 60)


def _columns(classes, group):
    if group in ("log_evidence", "prediction"):
        return [group]
    return [f"{group}_{c}" for c in classes]


@pytest.mark.parametrize("group", OUTPUTS)
def test_each_group_alone_equals_the_python_api(fitted, tmp_path, group):
    out = tmp_path / "scored.parquet"
    result = invoke("score", fitted / "test.parquet", "-m", f"{fitted}/m.duckdb:nb", "--keep", "id",
                    "--outputs", group, "--out", out)
    assert result.exit_code == 0, result.stderr
    got = pq.read_table(out)
    model = sqlnb.load(str(fitted / "m.duckdb"), "nb")
    assert got.column_names == ["id", *_columns(model.classes, group)]
    assert got["id"].to_pylist() == list(range(60))  # one row per input row, in order
    want = model.score(str(fitted / "test.parquet"), outputs=(group,), keep=["id"]).arrow().read_all()
    for name in got.column_names:
        if group == "prediction":
            assert got[name].to_pylist() == want[name].to_pylist()
        else:
            np.testing.assert_allclose(np.array(got[name].to_pylist(), float), np.array(want[name].to_pylist(), float),
                                       rtol=0, atol=1e-12)


def test_groups_combine_in_one_order_and_repeat_harmlessly(fitted):
    result = invoke("score", fitted / "test.parquet", "-m", f"{fitted}/m.duckdb:nb", "--keep", "",
                    "--outputs", "prediction,jll", "--outputs", "log_evidence,jll", "--out", "-")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "jll_a,jll_b,jll_c,log_evidence,prediction" and len(lines) == 61
    # log_evidence is the log-sum-exp of the jll columns, row by row
    rows = np.array([[float(v) for v in line.split(",")[:4]] for line in lines[1:]])
    np.testing.assert_allclose(np.logaddexp.reduce(rows[:, :3], axis=1), rows[:, 3], rtol=1e-12)


def test_sql_outputs_runs_in_duckdb_and_matches_score(fitted, tmp_path):
    shown = invoke("sql", fitted / "test.parquet", "-m", f"{fitted}/m.duckdb:nb", "--outputs", "log_proba,prediction")
    assert shown.exit_code == 0, shown.stderr
    rows = duckdb.sql(shown.stdout.rstrip().rstrip(";")).arrow().read_all()
    assert rows.column_names[-4:] == ["log_proba_a", "log_proba_b", "log_proba_c", "prediction"]
    assert "proba_a" not in rows.column_names
    scored = invoke("score", fitted / "test.parquet", "-m", f"{fitted}/m.duckdb:nb", "--outputs",
                    "log_proba,prediction", "--out", tmp_path / "s.parquet")
    assert scored.exit_code == 0
    assert rows["prediction"].to_pylist() == pq.read_table(tmp_path / "s.parquet")["prediction"].to_pylist()
    macro = invoke("sql", "-m", f"{fitted}/m.duckdb:nb", "--macro", "m", "--outputs", "jll")
    assert macro.exit_code == 0 and '"jll_a"' in macro.stdout and '"prediction"' not in macro.stdout.split("FROM")[0]


@pytest.mark.parametrize("args,fragments", [
    (("--outputs", "probas"), ["unknown output 'probas'", "did you mean 'proba'", "choose from: jll"]),
    (("--outputs", "proba,jl"), ["unknown output 'jl'", "did you mean 'jll'"]),
    (("--outputs", ","), ["--outputs needs at least one of"]),
    (("--outputs", "proba", "--no-proba"), ["--no-proba and --outputs", "--outputs prediction is --no-proba"]),
])
def test_bad_outputs_is_one_error_line_and_writes_nothing(fitted, tmp_path, args, fragments):
    out = tmp_path / "scored.parquet"
    before = snapshot(tmp_path)
    result = invoke("score", fitted / "test.parquet", "-m", f"{fitted}/m.duckdb:nb", *args, "--out", out)
    assert_error(result, *fragments)
    assert snapshot(tmp_path) == before
    assert_error(invoke("sql", "-m", f"{fitted}/m.duckdb:nb", "--outputs", "jl"), "unknown output 'jl'")
    assert_error(invoke("sql", "--fit", fitted / "train.parquet", "-y", "y", "--outputs", "jll"),
                 "leave it out with --fit")
