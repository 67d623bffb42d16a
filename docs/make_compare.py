"""Write docs/compare.md and the learning-curve plots docs/compare_{spambase,adult}.svg.

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

#: The same model options on both datasets: plain LDA (undefined while the pooled
#: covariance is singular), QDA with a small eigenvalue floor (defined at every size),
#: logistic regression on standardised columns with C = 1 (scikit-learn's default).
OPTIONS = {"qda": {"reg_param": 0.01}, "logistic": {"C": 1.0, "standardize": True}}
#: A second logistic regression line, nearly unpenalised as in Ng & Jordan's comparison.
WEAK = {"logistic": {"C": 1e4, "standardize": True}}
LABELS = {"logistic_weak": "logistic regression, C = 1e4"}
COLOURS = {"logistic_weak": "#17becf"}
REPEATS = 10
SEED = 0

def _dataset(name: str, label: str, features, n_train: int, count: int, what: str) -> dict:
    return dict(setup="CREATE TABLE data AS " + sd.render(sd.query(name)),
                train="SELECT * FROM data WHERE NOT is_test", test="SELECT * FROM data WHERE is_test",
                label=label, features=list(features),
                sizes=compare.default_sizes(n_train, count=count, smallest=10), what=what)


DATASETS = {
    "spambase": _dataset("spambase", "spam", sd.SPAMBASE_FEATURES, 3065, 9,
                         "spambase, ESL split (3,065 training / 1,536 test rows), all 57 numeric columns"),
    "adult": _dataset("adult", "income", sd.ADULT_NUMERIC, sd.ADULT_TRAIN_ROWS, 10,
                      "adult, adult.data (32,561 rows) / adult.test (16,281 rows), the 6 numeric columns"),
}


HEADER = """# Learning curves: naive Bayes, LDA, QDA and logistic regression

Ng & Jordan (2002): a generative classifier (naive Bayes) reaches its asymptotic error with
few examples, its discriminative partner (logistic regression) has the lower asymptotic
error. Below, test error against training-set size for all four sqlnb model kinds, written
by `docs/make_compare.py` (run from the repository root):

    /work/venv/bin/python docs/make_compare.py

which calls, per dataset:

```python
rows = sqlnb.learning_curves(train, test, label, con=con, sizes=sizes, repeats={repeats},
                             seed={seed}, features=features, options={options!r})
weak = sqlnb.learning_curves(train, test, label, con=con, sizes=sizes, repeats={repeats},
                             seed={seed}, features=features, models=["logistic"], options={weak!r})
rows += [dict(r, model="logistic_weak") for r in weak]   # same training subsets
summary = sqlnb.compare.summarize(rows)
sqlnb.compare.svg_plot(summary, title, "docs/compare_<name>.svg", labels=LABELS, colours=COLOURS)
sqlnb.compare.markdown_table(summary, LABELS)
```

How it is set up:

- Training subsets: for repeat r, the first m training rows in `hash(<all columns>, seed + r)`
  order, so subsets are random, reproducible and nested across sizes; every model kind is
  fitted on the same rows and scored on the whole test set in SQL.
- Features: the same columns for every model. adult uses its 6 numeric columns only
  (LDA, QDA and logistic regression take numeric features; naive Bayes then models the
  same 6 columns as Gaussians), so the comparison is like for like.
- Logistic regression: `standardize=True` (as `StandardScaler` + `LogisticRegression(C=1)`),
  and a second line with C = 1e4: Ng & Jordan compare with unpenalised logistic regression,
  and the default penalty (C = 1) already protects it well from overfitting a few rows.
- LDA: no shrinkage, so it is undefined (singular pooled covariance) until the subset has
  enough rows and varying columns; those cells show "—" or "(r of n)".
- QDA: `reg_param=0.01` (each class covariance becomes 0.99·C + 0.01·I), defined at every
  size; unregularised QDA is singular on spambase (columns constant within a class).
"""


def run(name: str) -> str:
    spec = DATASETS[name]
    con = duckdb.connect()
    con.execute(spec["setup"])
    start = time.process_time()  # CPU seconds (DuckDB's threads included): the machine is shared
    common = dict(con=con, sizes=spec["sizes"], repeats=REPEATS, seed=SEED, features=spec["features"])
    rows = sqlnb.learning_curves(spec["train"], spec["test"], spec["label"], options=OPTIONS, **common)
    weak = sqlnb.learning_curves(spec["train"], spec["test"], spec["label"], models=["logistic"], options=WEAK,
                                 **common)
    rows += [dict(r, model="logistic_weak") for r in weak]
    seconds = time.process_time() - start
    summary = compare.summarize(rows)
    compare.svg_plot(summary, f"{name}: test error vs training rows", str(ROOT / "docs" / f"compare_{name}.svg"),
                     labels=LABELS, colours=COLOURS)
    reasons = {}
    for r in rows:
        if r["reason"]:
            reasons.setdefault(r["model"], r["reason"])
    notes = "".join(f"- {compare.LABELS.get(m, m)} undefined, e.g.: {reason}\n" for m, reason in reasons.items())
    return (f"## {name}\n\n{spec['what']}; {REPEATS} random training subsets per size "
            f"({seconds:.0f} CPU seconds for all fits and test scorings).\n\n![{name}](compare_{name}.svg)\n\n"
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
    return (f"Naive Bayes has the lower mean test error than logistic regression (C = 1) at sizes {ahead('logistic')}, "
            f"than logistic regression (C = 1e4) at sizes {ahead('logistic_weak')}; at the full {full} rows: "
            f"logistic regression {100 * err[('logistic', full)]:.2f} % (C = 1), "
            f"{100 * err[('logistic_weak', full)]:.2f} % (C = 1e4), naive Bayes {100 * err[('naive_bayes', full)]:.2f} %.\n")


if __name__ == "__main__":
    parts = [HEADER.format(repeats=REPEATS, seed=SEED, options=OPTIONS, weak=WEAK)]
    for name in DATASETS:
        section = run(name)
        print(section, flush=True)
        parts.append(section)
    (ROOT / "docs" / "compare.md").write_text("\n".join(parts))
