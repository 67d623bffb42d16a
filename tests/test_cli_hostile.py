"""Defects found by tests/test_cli_fuzz.py, each held by a small deterministic case.

Every case runs the command line in-process and checks the contract of docs/cli.md
(:func:`support.contract.check`: no traceback, an exit code of the table, one ``Error:``
line at most) and then what the fix is meant to give.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from support.contract import run


def parquet(d, **columns) -> str:
    path = d / "t.parquet"
    pq.write_table(pa.table(columns), path)
    return str(path)


def test_report_of_a_categorical_column_null_in_every_training_row(tmp_path):
    """A categorical column NULL in every training row has no value and no term; the
    report's per-class table listed its strongest value and raised ValueError (argmax of
    an empty sequence), exit 1 with a traceback. It adds nothing to any class: score 0,
    left out of the table."""
    data = parquet(tmp_path, y=["a", "A", "a", "A"], x=pa.nulls(4, pa.int64()), z=pa.array([1, 0, None, 0]))
    model = f"{tmp_path / 'm.duckdb'}:m"
    assert run("fit", data, "-y", "y", "-m", model, "--kind", "categorical").exit_code == 0
    assert run("report", data, "-m", model, "--out", tmp_path / "r.html").exit_code == 0
    assert "Top features per class" in (tmp_path / "r.html").read_text()


def test_score_refusing_a_source_prints_only_the_error_line(tmp_path):
    """A source with a column that scoring adds (``prediction``) is refused; score named the
    unseen categories on stderr first, so the failure was two lines (a ``note:`` and the
    ``Error:``). The query is now built, and the source refused, before the note."""
    train = tmp_path / "train.parquet"
    pq.write_table(pa.table({"y": ["a", "b"] * 3, "c": ["u", "v"] * 3, "prediction": [1.0, 2.0, 3.0] * 2}), train)
    test = tmp_path / "test.parquet"
    pq.write_table(pa.table({"y": ["a", "b"] * 3, "c": ["new"] * 6, "prediction": [1.0, 2.0, 3.0] * 2}), test)
    model = f"{tmp_path / 'm.duckdb'}:m"
    assert run("fit", train, "-y", "y", "-m", model).exit_code == 0
    result = run("score", test, "-m", model, "--out", "-")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: the source already has a column named 'prediction'")


def test_fit_on_values_near_the_largest_double_prints_one_line(tmp_path):
    """Class means of ±1e200 overflow δ² where the per-class moments are pooled; numpy's
    RuntimeWarning (two lines, with a file path) came before the ``Error:`` line."""
    data = parquet(tmp_path, y=["a", "b"] * 3, g=[1e200, -1e200, 1e200, -1e200, 1e200, -1e200])
    result = run("fit", data, "-y", "y", "-m", f"{tmp_path / 'm.duckdb'}:m")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: the variance of column 'g'")


def _cv_data(tmp_path) -> str:
    return parquet(tmp_path, y=["a", "b"] * 6, g=[0.1, 1.2, 0.3, 1.1, 0.2, 0.9] * 2, h=[1.0, 0.2, 0.8, 0.1, 1.3, 0.0] * 2)


def test_cv_grid_of_a_non_number_for_var_smoothing(tmp_path):
    """``--grid var_smoothing=abc`` reached ``math.isfinite('abc')``: TypeError, a traceback."""
    result = run("cv", _cv_data(tmp_path), "-y", "y", "--folds", 2, "--grid", "var_smoothing=abc")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: var_smoothing must be >= 0, not 'abc'")


def test_cv_grid_of_one_number_for_feature_alpha(tmp_path):
    """``--grid feature_alpha=1`` (a mapping column -> alpha, given one number): TypeError,
    'float' object is not iterable."""
    result = run("cv", _cv_data(tmp_path), "-y", "y", "--folds", 2, "--grid", "feature_alpha=1")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: feature_alpha maps columns to their alpha")


def test_cv_grid_of_text_for_a_flag_is_refused(tmp_path):
    """``--grid norm=abc`` and ``--grid standardize=abc`` were taken as true (any non-empty
    text is), so the grid point's parameters said 'abc'; they are refused as
    tied_variance=abc already was. ``true,false`` stays a grid of two points."""
    data = _cv_data(tmp_path)
    for kind, flag in (("complement", "norm"), ("logistic", "standardize")):
        result = run("cv", data, "-y", "y", "--folds", 2, "--kind", kind, "--grid", f"{flag}=abc")
        assert result.exit_code == 2
        assert result.stderr.startswith(f"Error: {flag} must be True or False, not 'abc'")
        result = run("cv", data, "-y", "y", "--folds", 2, "--kind", kind, "--grid", f"{flag}=true,false",
                     "--format", "json")
        assert result.exit_code == 0, result.stderr


def test_sample_of_a_binned_model_is_refused_in_one_line(tmp_path):
    """Binned features fell through to the count families' sampler: AttributeError
    ('Counts' object has no attribute 'total'), a traceback."""
    data = _cv_data(tmp_path)
    model = f"{tmp_path / 'm.duckdb'}:m"
    assert run("fit", data, "-y", "y", "-m", model, "--bins", "quantile:3").exit_code == 0
    result = run("sample", "-m", model, "-n", 3, "--out", "-")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: sampling binned features is not supported ('g' is one)")


def test_evaluate_without_the_label_prints_only_the_error_line(tmp_path):
    """Rows without the label column: evaluate named the unseen categories first (a
    ``warning:`` line), then the ``Error:``; the names now come once the figures are
    computed."""
    train = tmp_path / "train.parquet"
    pq.write_table(pa.table({"y": ["a", "b"] * 3, "c": ["u", "v"] * 3}), train)
    test = tmp_path / "test.parquet"
    pq.write_table(pa.table({"c": ["new"] * 6}), test)
    model = f"{tmp_path / 'm.duckdb'}:m"
    assert run("fit", train, "-y", "y", "-m", model).exit_code == 0
    result = run("evaluate", test, "-m", model)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: label column 'y' not found")
    test_labelled = tmp_path / "labelled.parquet"
    pq.write_table(pa.table({"y": ["a", "b"] * 3, "c": ["new"] * 6}), test_labelled)
    result = run("evaluate", test_labelled, "-m", model)  # the warning is still given when evaluate succeeds
    assert result.exit_code == 0 and result.stderr.startswith("warning: column 'c': 6 of 6"), result.stderr
