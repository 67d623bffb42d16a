"""``sqlnb cv`` takes the model options of ``sqlnb fit`` (one definition,
:func:`sqlnb.cli.options.fit_options`), ``sqlnb compare`` its --shrinkage and --reg-param,
and :func:`sqlnb.cross_validate` the keyword arguments of :func:`sqlnb.fit`.

Run on a real CSV: the first 3,000 rows of UCI adult written as a CSV file with a header
(from ../shared/data, never copied into the repository). Each option is checked three ways:
``sqlnb cv`` as a separate process gives the per-fold figures of the Python call with the
same keyword, bit for bit; those figures differ from the run without the option (so the
option reached the model); and for --shrinkage and --feature-kind they are the figures of
``sqlnb fit`` with that option on the other folds' rows, evaluated by ``sqlnb evaluate`` on
the fold; so are they for --bins, whose cut points each fold's model computes from its
training rows (sqlnb.workflows.fold_bins).
"""

from __future__ import annotations

import inspect
import json

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.cli import cli
from support import shared_data as sd
from support.cli import assert_error, invoke, run_process
from support.cv_oracle import oracle_folds

pytestmark = pytest.mark.shared_data

FOLDS = 3
#: Naive Bayes: numeric (Gaussian, or binned) and categorical columns; fnlwgt, nearly an
#: identifier on 3,000 rows, is left out by listing the features (no screening then).
NB = "age,education-num,hours-per-week,capital-gain,sex,relationship,workclass"
#: LDA and QDA: the numeric columns.
DENSE = "age,education-num,hours-per-week,capital-gain"

#: (CLI options, the Python keyword arguments they stand for, the features).
CASES = {
    "bins": (["--bins", "mdl"], {"bins": "mdl"}, NB),
    "bins-per-column": (["--bins", "quantile:4", "--bins", "capital-gain=mdl"],
                        {"bins": {"capital-gain": "mdl", None: "quantile:4"}}, NB),
    "feature-kind": (["--feature-kind", "education-num=categorical"],
                     {"feature_kinds": {"education-num": "categorical"}}, NB),
    "structure": (["--structure", "tan", "--bins", "mdl"], {"structure": "tan", "bins": "mdl"}, NB),
    "shrinkage": (["--kind", "lda", "--shrinkage", "0.3"], {"model": "lda", "shrinkage": 0.3}, DENSE),
    "reg-param": (["--kind", "qda", "--reg-param", "0.1"], {"model": "qda", "reg_param": 0.1}, DENSE),
}


@pytest.fixture(scope="module")
def adult_csv(tmp_path_factory):
    sd.require_shared_data("adult")
    path = tmp_path_factory.mktemp("cv_options") / "adult.csv"
    con = duckdb.connect()
    con.sql(sd.render(sd.adult_train_query())).limit(3000).write_csv(str(path), header=True)
    con.close()
    return path


def cli_cv(csv, features, *options) -> dict:
    """``sqlnb cv`` in a process of its own, its JSON report."""
    done = run_process("cv", csv, "-y", "income", "--folds", FOLDS, "--features", features, *options,
                       "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def python_cv(csv, features, **kwargs) -> sqlnb.workflows.cv.CVResult:
    return sqlnb.cross_validate(str(csv), "income", folds=FOLDS, features=features.split(","), refit=False, **kwargs)


@pytest.mark.parametrize("case", list(CASES))
def test_cv_option_gives_the_python_calls_figures(adult_csv, case):
    options, kwargs, features = CASES[case]
    got = cli_cv(adult_csv, features, *options)
    want = python_cv(adult_csv, features, **kwargs)
    assert got["model"] == want.model == kwargs.get("model", "naive_bayes")
    assert got["fold_rows"] == want.fold_rows == [1000] * FOLDS
    (g,), (w,) = got["results"], want.results
    assert g["accuracy"] == w["accuracy"] and g["log_loss"] == w["log_loss"]  # the same code: bit for bit
    plain = python_cv(adult_csv, features, **({"model": kwargs["model"]} if "model" in kwargs else {}))
    assert plain.results[0]["log_loss"] != w["log_loss"]  # the option reached the fold models


def fit_fold_by_fold(tmp_path, csv, features, options) -> list[dict]:
    """Per fold of the documented fold rule (test_cv.oracle_folds): ``sqlnb fit`` with
    ``options`` on the other folds' rows, ``sqlnb evaluate`` on the fold's rows."""
    con = duckdb.connect()
    con.execute("CREATE TABLE rows AS SELECT * FROM read_csv(?)", [str(csv)])
    rows, fold = oracle_folds(con, "rows", "income", FOLDS, 0)
    out = []
    for i in range(FOLDS):
        train, held = tmp_path / f"train{i}.parquet", tmp_path / f"held{i}.parquet"
        pq.write_table(rows.filter(pa.array(fold != i)), train)
        pq.write_table(rows.filter(pa.array(fold == i)), held)
        model = f"{tmp_path}/m.duckdb:fold{i}"
        fitted = invoke("fit", train, "-y", "income", "--features", features, *options, "--model", model)
        assert fitted.exit_code == 0, fitted.stderr
        evaluated = invoke("evaluate", held, "--model", model, "--format", "json")
        assert evaluated.exit_code == 0, evaluated.stderr
        out.append(json.loads(evaluated.stdout))
    return out


@pytest.mark.parametrize("case", ["shrinkage", "feature-kind", "bins"])
def test_cv_fold_figures_are_sqlnb_fit_on_the_other_folds(adult_csv, tmp_path, case):
    options, _, features = CASES[case]
    (got,) = cli_cv(adult_csv, features, *options)["results"]
    folds = fit_fold_by_fold(tmp_path, adult_csv, features, options)
    assert [f["labelled_rows"] for f in folds] == [1000] * FOLDS
    assert got["accuracy"] == [f["accuracy"] for f in folds]
    np.testing.assert_allclose(got["log_loss"], [f["log_loss"] for f in folds], rtol=0, atol=1e-9)


@pytest.mark.parametrize("options, fragments", [
    (["--shrinkage", "2"], ["Invalid value for '--shrinkage'", "0<=x<=1"]),
    (["--kind", "qda", "--reg-param", "-0.5"], ["Invalid value for '--reg-param'"]),
    (["--kind", "lda", "--bins", "mdl"], ["--bins applies to naive Bayes only, not to --kind lda"]),
    (["--shrinkage", "0.1"], ["--shrinkage applies to --kind lda only, not to --kind auto"]),
    (["--bins", "tertiles"], ["'tertiles'"]),
    (["--structure", "tann"], ["unknown structure 'tann'"]),
    (["--feature-kind", "age=gaussan"], ["'gaussan'"]),
    (["--weight", "age"], ["cross-validation does not support row weights yet"]),
])
def test_an_invalid_option_is_one_error_line(adult_csv, options, fragments):
    # In-process (the contract is the same; a process of its own for the first case).
    run = run_process if options == ["--shrinkage", "2"] else invoke
    assert_error(run("cv", adult_csv, "-y", "income", "--folds", FOLDS, "--features", NB, *options), *fragments)


def test_cv_help_lists_every_model_option_of_fit_with_its_help():
    fit_help = invoke("fit", "--help").stdout
    cv_help = run_process("cv", "--help")
    assert cv_help.returncode == 0, cv_help.stderr
    for option in ("--bins", "--feature-kind", "--structure", "--shrinkage", "--reg-param", "--alpha",
                   "--binarize", "--C", "--stop-words"):
        assert f"  {option} " in cv_help.stdout and f"  {option} " in fit_help
    # Every model option of fit is cv's, with the same name, help text and type (one definition).
    fit_cmd, cv_cmd = cli.get_command(None, "fit"), cli.get_command(None, "cv")
    cv_params = {p.name: p for p in cv_cmd.params}
    not_model = {"label", "model", "replace", "data", "data_format", "column_types", "delimiter", "null_string",
                 "header", "names", "database",
                 "auto", "budget"}  # fit --auto runs cross-validations itself (sqlnb.workflows.auto)
    for p in fit_cmd.params:
        if p.name in not_model:
            continue
        q = cv_params[p.name]
        assert (q.opts, q.help, repr(q.type), q.multiple) == (p.opts, p.help, repr(p.type), p.multiple), p.name


def test_cross_validate_takes_the_keyword_arguments_of_fit(adult_csv):
    # floor_note: the estimators' switch for fit's variance-floor note (they give their own);
    # cross-validation gives no such note. auto and budget: sqlnb.fit's search, which is a
    # cross-validation of its own; every other keyword is the fit's (api.fit, which each fold runs).
    fit_args = {n for n, p in inspect.signature(sqlnb.fit).parameters.items()
                if p.kind == p.KEYWORD_ONLY and n not in ("floor_note", "auto", "budget")}
    assert fit_args == {n for n, p in inspect.signature(sqlnb.api.fit).parameters.items()
                        if p.kind == p.KEYWORD_ONLY and n != "floor_note"}
    cv_args = set(inspect.signature(sqlnb.cross_validate).parameters)
    assert fit_args <= cv_args
    for call in (sqlnb.fit, python_cv):  # refused alike
        with pytest.raises(sqlnb.SqlnbError, match="^bins applies to naive Bayes only, not to model 'lda'$"):
            call(str(adult_csv), "income", features=DENSE.split(","), model="lda", bins="mdl") if call is sqlnb.fit \
                else call(adult_csv, DENSE, model="lda", bins="mdl")
    # Their defaults, given explicitly, are no options at all.
    plain = python_cv(adult_csv, DENSE, model="lda")
    explicit = python_cv(adult_csv, DENSE, model="lda", kind="auto", feature_kinds=None, weight=None, binarize=0.0,
                         text=None, bins=None, select_k=None)
    assert explicit.results == plain.results


def compare_json(csv, *options) -> list[dict]:
    done = run_process("compare", csv, "-y", "income", "--features", "age,education-num,sex,relationship",
                       "--models", "lda,qda", "--sizes", "500", "--repeats", 2, *options, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_compare_regularises_lda_and_qda_on_one_hot_columns(adult_csv):
    """One-hot indicators of a column sum to one: without --shrinkage / --reg-param, LDA and
    QDA are undefined on every subset; with them, they are the library's figures."""
    bare = compare_json(adult_csv)
    assert {(r["model"], r["runs"], r["undefined"], r["mean_error"]) for r in bare} == \
        {(m, 0, 2, None) for m in ("lda", "qda")}  # every subset undefined
    shrunk = compare_json(adult_csv, "--shrinkage", "0.2", "--reg-param", "0.1")
    assert [(r["model"], r["size"], r["runs"]) for r in shrunk] == [("lda", 500, 2), ("qda", 500, 2)]
    from sqlnb.workflows import compare as cmp
    from sqlnb.workflows.folds import assign_folds, fold_source
    from sqlnb.engines import as_engine
    from sqlnb.source import read_with

    con = duckdb.connect()
    engine = as_engine(con)
    train = engine.resolve(read_with(str(adult_csv), keep_text=("income",)))
    train, fold = assign_folds(train, "income", 4, 0, None, "duckdb")
    train, test = fold_source(train, fold, 0, held_out=False), fold_source(train, fold, 0)
    train, test, options = cmp.encode(con, train, test, "income", ["age", "education-num", "sex", "relationship"])
    options["lda"]["shrinkage"], options["qda"]["reg_param"] = 0.2, 0.1
    rows = cmp.learning_curves(train, test, "income", con=con, models=["lda", "qda"], sizes=[500], repeats=2,
                               seed=0, options=options)
    assert shrunk == json.loads(json.dumps(cmp.summarize(rows)))


def test_compare_refuses_an_option_of_a_kind_it_leaves_out(adult_csv):
    assert_error(invoke("compare", adult_csv, "-y", "income", "--models", "naive_bayes,qda", "--shrinkage", "0.1"),
                 "--shrinkage applies to lda only, which --models leaves out")
    assert_error(invoke("compare", adult_csv, "-y", "income", "--reg-param", "2"), "Invalid value for '--reg-param'")


def test_calibrate_and_conformal_clear_say_what_they_did(tmp_path):
    """The --clear and missing-DATA lines of calibrate and conformal (one helper)."""
    for command, clear, missing in (
            ("calibrate", "--clear removes the calibrator and reads no DATA; give only --model",
             "give DATA, the held-out labelled rows to calibrate on (or --clear)"),
            ("conformal", "--clear removes the sets and reads no DATA; give only --model",
             "give DATA, the held-out labelled rows to fit the sets on (or --clear)")):
        line = assert_error(invoke(command, tmp_path / "x.csv", "--model", f"{tmp_path}/m.duckdb:nb", "--clear"))
        assert line == f"Error: {clear}"
        assert assert_error(invoke(command, "--model", f"{tmp_path}/m.duckdb:nb")) == f"Error: {missing}"
