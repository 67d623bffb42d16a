"""Property: no command ends in a traceback, whatever the data, model and options.

Hypothesis draws a small hostile table (NULL, NaN and infinite values, all-NULL and
constant columns, one class, one row, no rows, unicode and quoted names, labels that
collide after case folding), writes it as Parquet, CSV or a DuckDB table, draws a model
(naive Bayes of every family, binned, TAN, text bags, a wide table, LDA, QDA, logistic,
then maybe calibrated or with a decision rule) and a sequence of commands with options
(score, evaluate, report, show, sql, cv, select, calibrate, decide, update, novelty,
sample, mi, models, drop, fit-em ...), and runs them in-process with click's CliRunner.
Every command must

* end without an exception other than click's exit (a traceback is a defect);
* exit with a code of docs/cli.md's table (0, 1 only for ``evaluate --min-accuracy``, 2);
* print no ``Traceback`` and at most one ``Error:`` line; a failure prints exactly one
  line, ``Error: ...``, and nothing on stdout.

CI runs a fixed seed (``derandomize``) and ``SQLNB_FUZZ_EXAMPLES`` examples (default
40, 15-40 s by load); benchmarks/README.md ("CLI fuzz") gives the longer run. Defects the
longer runs found are held by deterministic tests in tests/test_cli_hostile.py.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

from support import contract

#: Column and table names that have broken tools before: quotes, spaces, SQL, unicode,
#: names of columns that scoring adds, names that differ only in case.
NAMES = ["x", "X", "naïve", "日本語", 'a"b', "it's", "sp ace", "semi;colon", "dot.ted", "-dash",
         "proba_a", "prediction", "rid", "SELECT", "Y", "y", "weight", "ß"]
LABEL_NAMES = ["y", "label", "Klasse ü", 'q"uote', "prediction", "proba_b", "x"]
#: Class values: pairs that fold to one another (a/A, ß/SS/ss, é and its decomposed form),
#: the empty string, digits, text that looks like a number or a boolean.
CLASSES = ["a", "A", "b", "ß", "SS", "ss", "é", "e\u0301", "", "1", "01", "true", "yes", " a", "a,b", 'q"t', "日"]
FINITE = st.floats(-5, 5, allow_nan=False)
FLOATS = st.one_of(FINITE, FINITE, FINITE, st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1e308, -1e-308, 5e-324]),
                   st.none())
WORDS = ["alpha", "beta", "Beta", "gamma", "ünï", "", " ", "x y z", "'", '"', "a,b"]


@st.composite
def columns(draw, n: int, hostile: bool):
    """One feature column of ``n`` rows: (name, pyarrow array); NaN, infinities, extreme
    values and all-NULL or constant columns only when ``hostile``."""
    kind = draw(st.sampled_from(["float"] * 4 + ["int", "text", "text", "bool", "body", "body", "bigcat"]
                                + ["null", "const"] * hostile))
    name = draw(st.sampled_from(NAMES))
    if kind == "float":
        values = draw(st.lists(FLOATS if hostile else st.one_of(FINITE, st.none()), min_size=n, max_size=n))
        return name, pa.array(values, pa.float64())
    if kind == "int":
        values = draw(st.lists(st.one_of(st.integers(-3, 3), st.none(), *[st.just(2**62)] * hostile),
                               min_size=n, max_size=n))
        return name, pa.array(values, pa.int64())
    if kind == "text":
        values = draw(st.lists(st.one_of(st.sampled_from(CLASSES), st.none()), min_size=n, max_size=n))
        return name, pa.array(values, pa.string())
    if kind == "bool":
        return name, pa.array(draw(st.lists(st.one_of(st.booleans(), st.none()), min_size=n, max_size=n)), pa.bool_())
    if kind == "body":
        words = st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)
        return name, pa.array(draw(st.lists(st.one_of(words, st.none()), min_size=n, max_size=n)), pa.string())
    if kind == "null":
        typ = draw(st.sampled_from([pa.float64(), pa.string(), pa.int64(), pa.null()]))
        return name, pa.nulls(n, typ)
    if kind == "const":
        value = draw(st.sampled_from([0.0, 1.0, "k", True, math.nan]))
        return name, pa.array([value] * n)
    return name, pa.array([f"v{i}" for i in range(n)], pa.string())  # an ID-like category


@st.composite
def tables(draw, wide: bool = False):
    """A small table: a label and 1-4 features (30 with ``wide``). Mostly 4-12 rows of two
    or three classes (so that fits succeed and the later commands run), sometimes one
    class, one row, no rows or no label at all."""
    shape = draw(st.sampled_from(["ok"] * 6 + ["one_class", "one_row", "empty", "null_label"]))
    n = {"one_row": 1, "empty": 0}.get(shape) or draw(st.integers(4, 12))
    label_name = draw(st.sampled_from(LABEL_NAMES))
    k = 1 if shape == "one_class" else draw(st.integers(2, 3))
    classes = draw(st.lists(st.sampled_from(CLASSES), min_size=k, max_size=k, unique=True))
    holes = draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n // 4)) if shape == "ok" else set()
    picks = [None if shape == "null_label" or i in holes else i % k for i in range(n)]
    label_kind = draw(st.sampled_from(["text", "text", "text", "int", "bool", "float"]))
    if label_kind == "text":
        label = pa.array([None if p is None else classes[p] for p in picks], pa.string())
    elif label_kind == "int":
        label = pa.array(picks, pa.int64())
    elif label_kind == "bool":
        label = pa.array([None if p is None else p % 2 == 0 for p in picks], pa.bool_())
    else:
        label = pa.array([None if p is None else (math.nan if p == 2 else float(p)) for p in picks], pa.float64())
    hostile = draw(st.sampled_from([False, False, True]))
    cols = [draw(columns(n, hostile)) for _ in range(30 if wide else draw(st.integers(1, 4)))]
    names, arrays = [label_name], [label]
    for i, (name, array) in enumerate(cols):
        if name in names or wide:
            name = f"{name}_{i}"  # duplicates stay possible only after case folding (x / X)
        names.append(name)
        arrays.append(array)
    order = draw(st.permutations(range(len(names))))
    return pa.table([arrays[i] for i in order], names=[names[i] for i in order]), label_name


def write_table(table: pa.Table, fmt: str, d: Path, stem: str) -> str:
    """``table`` as DATA: a Parquet or CSV file or a table in a DuckDB database."""
    if fmt == "parquet":
        pq.write_table(table, d / f"{stem}.parquet")
        return str(d / f"{stem}.parquet")
    if fmt == "csv":
        try:
            pcsv.write_csv(table, d / f"{stem}.csv")
        except pa.ArrowInvalid:  # a column of type null has no CSV form: write its header and empty cells
            pcsv.write_csv(table.cast(pa.schema([pa.field(f.name, pa.string() if f.type == pa.null() else f.type)
                                                 for f in table.schema])), d / f"{stem}.csv")
        return str(d / f"{stem}.csv")
    con = duckdb.connect(str(d / "data.duckdb"))
    try:
        con.register("arrow_src", table)
        con.execute(f"CREATE TABLE \"{stem}\" AS SELECT * FROM arrow_src")
    except duckdb.Error:  # duplicate names after case folding: DuckDB refuses them, so Parquet it is
        con.close()
        return write_table(table, "parquet", d, stem)
    con.close()
    return f"{d / 'data.duckdb'}:{stem}"


#: Model structures: fit arguments; ``{f}`` is replaced by a feature name of the table.
STRUCTURES = {
    "naive": [], "gaussian": ["--kind", "gaussian"], "categorical": ["--kind", "categorical"],
    "bernoulli": ["--kind", "bernoulli", "--binarize", "0.5"], "multinomial": ["--kind", "multinomial"],
    "complement": ["--kind", "complement", "--norm"], "binned_mdl": ["--bins", "mdl"],
    "binned_q": ["--kind", "binned", "--bins", "quantile:3"], "tan": ["--structure", "tan"],
    "tan_binned": ["--structure", "tan", "--bins", "quantile:2"], "text": ["--feature-kind", "{f}=multinomial"],
    "text_bernoulli": ["--feature-kind", "{f}=bernoulli", "--min-df", "1", "--max-features", "5"],
    "lda": ["--kind", "lda", "--shrinkage", "0.5"], "qda": ["--kind", "qda", "--reg-param", "0.5"],
    "logistic": ["--kind", "logistic", "--standardize"], "tied": ["--tied-variance"],
    "bucket": ["--unseen", "bucket", "--class-prior", "uniform"], "select_k": ["--select-k", "1"],
    "dirichlet": ["--prior-alpha", "2"], "weighted": ["--weight", "{f}"], "features": ["--features", "{f}"],
    "mle": ["--estimator", "mle", "--alpha", "0"], "wide": [],
}

COMMANDS = ["score", "score_opts", "evaluate", "evaluate_json", "report", "show", "show_params", "sql", "sql_fit",
            "cv", "select", "calibrate", "decide", "update", "novelty", "sample", "mi", "models", "drop", "fit_em",
            "explain", "refit", "compare", "sql_macro", "score_key", "long"]


@st.composite
def cases(draw):
    structure = draw(st.sampled_from(sorted(STRUCTURES)))
    table, label = draw(tables(wide=structure == "wide"))
    other = draw(st.sampled_from([None, None, "drift", "fresh"]))
    if other == "fresh":  # other rows, other names and types
        other = draw(tables())[0]
    elif other == "drift":  # the training rows with one column gone, or read as text
        name = draw(st.sampled_from(table.column_names))
        i = table.column_names.index(name)
        other = (table.remove_column(i) if draw(st.booleans())
                 else table.set_column(i, name, pa.array([None if v is None else str(v)
                                                          for v in table.column(i).to_pylist()], pa.string())))
    fmt = draw(st.sampled_from(["parquet", "csv", "duckdb"]))
    features = [c for c in table.column_names if c != label] or [label]
    feature = draw(st.sampled_from(features))
    fit_args = [a.replace("{f}", feature) for a in STRUCTURES[structure]]
    fit_args += draw(st.sampled_from([[]] * 4 + [["--class-prior", "{c0}=0.7,{c1}=0.3"], ["--prior-alpha", "{c0}=3"],
                                                 ["--feature-alpha", f"{feature}=0.5"], ["--binarize", f"{feature}=0"],
                                                 ["--exclude", feature], ["--keep-columns", feature],
                                                 ["--var-smoothing", "0"], ["--alpha", "1e-300"],
                                                 ["--token-pattern", "("], ["--stop-words", "@missing.txt"],
                                                 ["--bins", f"{feature}=quantile:1"], ["--max-df", "0.0"],
                                                 ["--select-k", "100"], ["--columns", f"{feature}=INTEGER"],
                                                 ["--null-string", ""], ["--data-format", "json"],
                                                 ["--feature-kind", f"{feature}=binned"]]))
    after = draw(st.sampled_from([None, None, "calibrate", "decide_threshold", "decide_reject", "decide_costs"]))
    commands = draw(st.lists(st.sampled_from(COMMANDS), min_size=1, max_size=3))
    choices = draw(st.lists(st.integers(0, 5), min_size=8, max_size=8))
    model_name = draw(st.sampled_from(["m", "we'ird name", "日本", 'q"m', "a:b"]))
    return dict(structure=structure, table=table, label=label, other=other, fmt=fmt, fit_args=fit_args,
                after=after, commands=commands, choices=choices, model_name=model_name, feature=feature)


def run(argv: list):
    result = contract.run(*argv)
    event(f"{argv[0]} exit {result.exit_code}")
    return result


def classes_of(case: dict) -> list[str]:
    return [str(c) for c in dict.fromkeys(case["table"].column(case["label"]).to_pylist()) if c is not None] or ["a"]


def command_args(name: str, case: dict, data: str, data2: str, model: str, d: Path, choice: int) -> list:
    """The argument list of one follow-up command."""
    label = case["label"]
    classes = classes_of(case)
    cls = classes[choice % len(classes)]
    if name == "score":
        out = ["-", str(d / "out.parquet"), str(d / "out.csv"), f"{d / 'out.duckdb'}:scored"][choice % 4]
        return ["score", data2, "-m", model, "--out", out, "--replace"]
    if name == "score_opts":
        opts = [["--keep", ""], ["--outputs", "jll,log_proba,log_evidence"], ["--no-proba"], ["--flag-novel"],
                ["--reject", "0.2"], ["--threshold", f"{cls}=0.3"]][choice]
        return ["score", data2, "-m", model, "--out", "-", *opts]
    if name == "explain":
        return ["score", data2, "-m", model, "--out", "-", "--explain", 1 + choice % 3]
    if name == "evaluate":
        opts = [[], ["--min-accuracy", "0.99"], ["--labels", "model"], ["--plots", str(d / "plots"), "--replace"],
                ["--label", label], ["--reject", "0.1"]][choice]
        return ["evaluate", data2, "-m", model, *opts]
    if name == "evaluate_json":
        return ["evaluate", data2, "-m", model, "--format", "json"]
    if name == "report":
        return ["report", data2, "-m", model, "--out", str(d / "r.html"), "--replace"]
    if name == "show":
        return ["show", "-m", model, *[[], ["--format", "json"], ["--top-terms", "2"], ["--top", "1"]][choice % 4]]
    if name == "show_params":
        return ["show", "-m", model, "--params", *[[], ["--format", "json"]][choice % 2]]
    if name == "sql":
        dialect = ["duckdb", "postgres", "spark", "sqlite", "snowflake", "bigquery"][choice]
        return ["sql", "-m", model, "--dialect", dialect, *[[], ["--explain", "2"]][choice % 2]]
    if name == "sql_fit":
        return ["sql", data, "--fit", "-y", label]
    if name == "cv":
        opts = [[], ["--kind", "lda"], ["--grid", ["alpha=0.5,1", "alpha=-1", "var_smoothing=abc", "nope=1"][choice % 4]],
                ["--refit", "-m", f"{d / 'cv.duckdb'}:best"], ["--scoring", "log_loss"],
                ["--format", "json", "--kind", "logistic"]][choice]
        return ["cv", data, "-y", label, "--folds", 2 + choice % 2, *opts]
    if name == "select":
        return ["select", data, "-y", label, "--folds", 2, *[[], ["--direction", "backward"]][choice % 2]]
    if name == "calibrate":
        return ["calibrate", data2, "-m", model, "--method", ["temperature", "platt", "isotonic"][choice % 3]]
    if name == "decide":
        costs = d / "costs.csv"
        costs.write_text(f"actual,predicted,cost\n\"{cls.replace(chr(34), 2 * chr(34))}\",x,5\n")
        return ["decide", "-m", model, *[["--threshold", f"{cls}=0.4"], ["--reject", "0.3"], ["--costs", costs],
                                          ["--clear"]][choice % 4]]
    if name == "update":
        return ["update", data2, "-m", model, *[[], ["--decay", "0.5"]][choice % 2]]
    if name == "novelty":
        return ["novelty", data2, "-m", model, "--quantile", [0.1, 0.5, 0.01][choice % 3]]
    if name == "sample":
        return ["sample", "-m", model, "-n", 3, "--out", "-", "--seed", choice]
    if name == "mi":
        return ["mi", data, "-y", label, *[[], ["--bins", "mdl"], ["--format", "json"]][choice % 3]]
    if name == "models":
        return ["models", model.rsplit(":", 1)[0] if ":" in model else model]
    if name == "drop":
        return ["drop", "-m", model]
    if name == "fit_em":
        return ["fit-em", data, "-y", label, "-m", f"{d / 'em.duckdb'}:em", "--max-iter", 2, "--replace"]
    if name == "compare":
        return ["compare", data, "-y", label, "--sizes", 2 + choice, "--repeats", 1,
                *[[], ["--models", "gaussian,logistic"], ["--test", data2]][choice % 3]]
    if name == "sql_macro":
        return ["sql", "-m", model, "--macro", ["s", "we'ird", "日本"][choice % 3]]
    if name == "score_key":
        key = case["table"].column_names[choice % case["table"].num_columns]
        return ["score", data2, "-m", model, "--out", "-", "--key", key]
    if name == "long":  # the training rows' feature as tokens of a long table: fit-long then score-long
        tokens = d / "tokens.parquet"
        t = case["table"]
        pq.write_table(pa.table({"doc": pa.array(range(t.num_rows), pa.int64()),
                                 "tok": t.column(case["feature"]).cast(pa.string())
                                 if pa.types.is_string(t.column(case["feature"]).type) or choice % 2
                                 else t.column(case["feature"])}), tokens)
        labels = d / "labels.parquet"
        pq.write_table(pa.table({"doc": pa.array(range(t.num_rows), pa.int64()), "lab": t.column(label)}), labels)
        if choice % 3 == 2:
            return ["score-long", tokens, "-m", f"{d / 'long.duckdb'}:l", "--out", "-"]
        return ["fit-long", tokens, labels, "--id", "doc", "--token", "tok", "--label", "lab",
                "-m", f"{d / 'long.duckdb'}:l", "--replace"]
    return ["fit", data, "-y", label, "-m", model, "--replace", *case["fit_args"]]  # refit


def run_case(case: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        classes = classes_of(case) * 2
        case = dict(case, fit_args=[a.replace("{c0}", classes[0]).replace("{c1}", classes[1])
                                    for a in case["fit_args"]])
        data = write_table(case["table"], case["fmt"], d, "train")
        data2 = data if case["other"] is None else write_table(case["other"], case["fmt"], d, "test")
        model = f"{d / 'models.duckdb'}:{case['model_name']}"
        fitted = run(["fit", data, "-y", case["label"], "-m", model, *case["fit_args"]]).exit_code == 0
        choices = case["choices"]
        if not fitted:
            pass
        elif case["after"] == "calibrate":
            run(["calibrate", data, "-m", model])
        elif case["after"] is not None:
            rule = {"decide_threshold": 0, "decide_reject": 1, "decide_costs": 2}[case["after"]]
            run(command_args("decide", case, data, data2, model, d, rule))
        for i, name in enumerate(case["commands"] if fitted else case["commands"][:1]):
            run(command_args(name, case, data, data2, model, d, choices[i]))


EXAMPLES = int(os.environ.get("SQLNB_FUZZ_EXAMPLES", "40"))
SEED = os.environ.get("SQLNB_FUZZ_SEED")
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def _seeded(test):
    return seed(int(SEED))(test) if SEED is not None else test


@_seeded
@SETTINGS
@given(case=cases())
def test_no_command_ends_in_a_traceback(case):
    run_case(case)
