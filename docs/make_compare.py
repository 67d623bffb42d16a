"""Write docs/compare.md and the learning-curve plots docs/compare_*.svg.

Run from the repository root::

    /work/venv/bin/python docs/make_compare.py

It reads ../shared/data through tests/support/shared_data.py (the queries the tests use).
Every figure in compare.md is printed by this script; nothing is typed by hand.
"""

import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import sqlnb  # noqa: E402
from sqlnb import compare  # noqa: E402
from support import shared_data as sd  # noqa: E402

#: Model options: plain LDA (undefined while the pooled covariance is singular), QDA with a
#: small eigenvalue floor (defined at every size), logistic regression on standardised
#: columns with scikit-learn's default C = 1 ...
OPTIONS = {"qda": {"reg_param": 0.01}, "logistic": {"C": 1.0, "standardize": True}}
#: ... and a second, nearly unpenalised logistic regression, as in Ng & Jordan's comparison.
WEAK = {"C": 1e4, "standardize": True}
LABELS = {"logistic_weak": "logistic regression, C = 1e4"}
COLOURS = {"logistic_weak": "#17becf"}
REPEATS = 10
SEED = 0
TRAIN, TEST = "SELECT * FROM data WHERE NOT is_test", "SELECT * FROM data WHERE is_test"

HEADER = """# Learning curves: naive Bayes, LDA, QDA and logistic regression

Ng & Jordan (2002): a generative classifier (naive Bayes) reaches its asymptotic error with
few examples; its discriminative partner (logistic regression) has the lower asymptotic
error. Below, test error against training-set size for the sqlnb model kinds, written by
`docs/make_compare.py` (run from the repository root, about 20 CPU minutes):

    /work/venv/bin/python docs/make_compare.py

Per section it calls (`features` and `options` as listed there):

```python
rows = sqlnb.learning_curves(train, test, label, con=con, models=models, sizes=sizes,
                             repeats={repeats}, seed={seed}, features=features, options=options)
weak = sqlnb.learning_curves(train, test, label, con=con, models=["logistic"], sizes=sizes,
                             repeats={repeats}, seed={seed}, features=features,
                             options={{"logistic": {weak!r}}})
rows += [dict(r, model="logistic_weak") for r in weak]   # the same training subsets
summary = sqlnb.compare.summarize(rows)
sqlnb.compare.svg_plot(summary, title, "docs/compare_<name>.svg", labels=LABELS, colours=COLOURS)
sqlnb.compare.markdown_table(summary, LABELS)
```

Set-up:

- Training subsets: for repeat r, the first m training rows in `hash(<all columns>, seed + r)`
  order: random, reproducible and nested across sizes. Every model kind is fitted on the
  same rows and scores the whole test set in SQL.
- Logistic regression: `standardize=True` (as `StandardScaler` + `LogisticRegression`), with
  scikit-learn's default C = 1, and a second line with C = 1e4: Ng & Jordan compare with
  unpenalised logistic regression, and the default penalty already protects it from
  overfitting a handful of rows.
- LDA: no shrinkage, so it is undefined (singular pooled covariance) until a subset has
  enough rows and no column constant in it; such cells show "—" or "(r of n)".
- QDA: `reg_param=0.01` (each class covariance becomes 0.99·C + 0.01·I), defined at every
  size; unregularised QDA is singular on spambase (columns constant within a class).
- adult, two ways: its 8 categorical columns — categorical naive Bayes against logistic
  regression on their one-hot encoding (`sqlnb.compare.one_hot`, built in SQL from the
  training categories), the pairing in which both have linear decision boundaries in the
  same indicators; LDA and QDA are left out there (the indicators of a column sum to one, so
  every covariance is singular) — and its 6 numeric columns, the same columns for all four
  kinds.

Reading: the shape appears where naive Bayes' model is sensible for the columns (adult's
categorical columns, spambase from about 20 rows). On adult's numeric columns Gaussian
naive Bayes is never ahead of the penalised logistic regression: capital-gain and
capital-loss are zero in most rows, so a small subset can give a class a near-zero variance
for them, and test rows with a non-zero value are then pushed to the other class (hence its
large spread at small sizes). At 10 spambase rows (about 5 per class to estimate 57 variances
each) it is behind as well.
"""


def _spambase(con):
    con.execute("CREATE TABLE data AS " + sd.render(sd.query("spambase")))
    return dict(train=TRAIN, test=TEST, label="spam", models=sqlnb.MODELS, features=list(sd.SPAMBASE_FEATURES),
                options=OPTIONS, sizes=compare.default_sizes(3065, count=9, smallest=10),
                what="spambase, ESL split (3,065 training / 1,536 test rows), all 57 numeric columns, "
                     "naive Bayes Gaussian")


def _adult_categorical(con):
    con.execute("CREATE TABLE data AS " + sd.render(sd.query("adult")))
    columns = list(sd.ADULT_CATEGORICAL)
    train, cats = compare.one_hot(con, TRAIN, columns)
    test, _ = compare.one_hot(con, TEST, columns, cats)
    options = {"naive_bayes": {"features": columns},
               "logistic": {**OPTIONS["logistic"], "features": compare.indicator_names(cats)}}
    return dict(train=train, test=test, label="income", models=["naive_bayes", "logistic"], features=None,
                options=options, sizes=compare.default_sizes(sd.ADULT_TRAIN_ROWS, count=10, smallest=10),
                what=f"adult, adult.data (32,561 rows) / adult.test (16,281 rows), the 8 categorical columns "
                     f"('?' as NULL): categorical naive Bayes; logistic regression on their "
                     f"{len(compare.indicator_names(cats))} one-hot indicators")


def _adult_numeric(con):
    con.execute("CREATE TABLE data AS " + sd.render(sd.query("adult")))
    return dict(train=TRAIN, test=TEST, label="income", models=sqlnb.MODELS, features=list(sd.ADULT_NUMERIC),
                options=OPTIONS, sizes=compare.default_sizes(sd.ADULT_TRAIN_ROWS, count=10, smallest=10),
                what="adult, the 6 numeric columns for every model kind, naive Bayes Gaussian")


SECTIONS = {"spambase": _spambase, "adult": _adult_categorical, "adult_numeric": _adult_numeric}


def run(name: str) -> str:
    con = duckdb.connect()
    spec = SECTIONS[name](con)
    start = time.process_time()  # CPU seconds (DuckDB's threads included): the machine is shared
    common = dict(con=con, sizes=spec["sizes"], repeats=REPEATS, seed=SEED, features=spec["features"])
    args = (spec["train"], spec["test"], spec["label"])
    rows = sqlnb.learning_curves(*args, models=spec["models"], options=spec["options"], **common)
    weak = {**spec["options"]["logistic"], **WEAK}
    rows += [dict(r, model="logistic_weak")
             for r in sqlnb.learning_curves(*args, models=["logistic"], options={"logistic": weak}, **common)]
    seconds = time.process_time() - start
    summary = compare.summarize(rows)
    compare.svg_plot(summary, f"{name}: test error vs training rows", str(ROOT / "docs" / f"compare_{name}.svg"),
                     labels=LABELS, colours=COLOURS)
    reasons = {}
    for r in rows:
        if r["reason"]:
            reasons.setdefault(r["model"], r["reason"])
    notes = "".join(f"- {LABELS.get(m, compare.LABELS.get(m, m))} undefined, e.g.: {reason}\n"
                    for m, reason in reasons.items())
    shown = {k: ("<the indicators>" if k == "features" and len(v) > 10 else v) for m, o in spec["options"].items()
             for k, v in o.items() if m == "logistic"}
    return (f"## {name}\n\n{spec['what']}; {REPEATS} random training subsets per size "
            f"({seconds:.0f} CPU seconds for all fits and test scorings). Models {list(spec['models'])}, "
            f"logistic options {shown}.\n\n![{name}](compare_{name}.svg)\n\n"
            f"Mean test error (%) ± std over the subsets; \"(r of n)\" where only r fits were defined.\n\n"
            f"{compare.markdown_table(summary, LABELS)}\n{notes}\n{shape(summary)}\n")


def shape(summary: list[dict]) -> str:
    """The Ng–Jordan reading of a summary, computed (not typed)."""
    err = {(s["model"], s["size"]): s["mean_error"] for s in summary}
    sizes = sorted({s["size"] for s in summary})

    def ahead(lr: str) -> list[int]:
        return [m for m in sizes if None not in (err[("naive_bayes", m)], err[(lr, m)])
                and err[("naive_bayes", m)] < err[(lr, m)]]

    full = sizes[-1]
    return (f"Naive Bayes has the lower mean test error than logistic regression (C = 1) at sizes "
            f"{ahead('logistic')}, than logistic regression (C = 1e4) at sizes {ahead('logistic_weak')}; "
            f"at the full {full} rows: logistic regression {100 * err[('logistic', full)]:.2f} % (C = 1), "
            f"{100 * err[('logistic_weak', full)]:.2f} % (C = 1e4), naive Bayes "
            f"{100 * err[('naive_bayes', full)]:.2f} %.\n")


if __name__ == "__main__":
    parts = [HEADER.format(repeats=REPEATS, seed=SEED, weak=WEAK)]
    for name in sys.argv[1:] or SECTIONS:
        section = run(name)
        print(section, flush=True)
        parts.append(section)
    (ROOT / "docs" / "compare.md").write_text("\n".join(parts))
