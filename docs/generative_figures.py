"""The figures of docs/generative_adult.md: naive Bayes, binned naive Bayes, wrapper
selection and tree-augmented naive Bayes (TAN, also with selection) on adult, and NB
against TAN by cross-validation on votes, iris and wine (and mushroom).

Run from the repository root::

    PYTHONPATH=. python docs/generative_figures.py           # print the tested tables
    PYTHONPATH=. python docs/generative_figures.py --all     # also the --all table
    PYTHONPATH=. python docs/generative_figures.py --all --write   # rewrite both in the docs

``--all`` also runs the published protocol on adult (docs/published_protocol.py: stratified
5-fold CV × 3 repeats, MDL bins per training fold) and writes that block of the page.

tests/test_generative_figures.py computes the tested tables with these same functions and
compares them with the page (``SQLNB_DOCS_UPDATE=1`` rewrites them there). The ``--all``
table holds the runs too slow for the test (forward selections, TAN with selection,
mushroom's 10-fold TAN);
it is written by this script only.

Data: ../shared/data through tests/support/shared_data.py (the queries the tests use; ``?``
is NULL, adult.test's labels lose their dot). iris and wine are scikit-learn's bundled
copies of the UCI files.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
warnings.simplefilter("ignore")

import sqlnb  # noqa: E402
from sqlnb.workflows.evaluate import evaluate  # noqa: E402
from support import shared_data as sd  # noqa: E402

sys.path.insert(0, str(ROOT / "docs"))
import published_protocol as protocol  # noqa: E402

DOC = ROOT / "docs" / "generative_adult.md"
BLOCKS = {"tested": ("<!-- generative-figures:start -->", "<!-- generative-figures:end -->"),
          "all": ("<!-- generative-figures-all:start -->", "<!-- generative-figures-all:end -->")}

#: adult's numeric columns read as categories (their distinct values), as in the teammates'
#: selection runs; fnlwgt (21,648 values) stays Gaussian.
AS_CATEGORIES = {c: "categorical" for c in ("age", "education-num", "hours-per-week", "capital-gain", "capital-loss")}
FOLDS, SEED = 10, 0
SELECT = "sqlnb select adult.duckdb:adult_train --label income --folds 10"
#: The 8 features of the averaged structures (docs/adult_variants.py's TAN_BACKWARD_8), for KDB(2) on them.
TAN_BACKWARD = ["age", "workclass", "fnlwgt", "education-num", "occupation", "relationship", "capital-gain",
                "capital-loss"]


@dataclass
class Run:
    """One adult model: how it is fitted (``fit`` or ``select`` options) and the command."""

    name: str
    command: str
    options: dict
    direction: str | None = None  # wrapper selection when set
    tested: bool = True
    tan_after: bool = False  # fit TAN on the chosen features afterwards
    found: dict = field(default_factory=dict)


def adult_runs() -> list[Run]:
    """Every adult model of the page, the tested ones first in their table order."""
    kinds = ",".join(f"{c}=categorical" for c in AS_CATEGORIES)
    return [
        Run("naive Bayes, Gaussian numeric columns", "sqlnb fit adult.duckdb:adult_train --label income", {}),
        Run("naive Bayes, MDL-binned numeric columns", "sqlnb fit … --bins mdl", {"bins": "mdl"}),
        Run("wrapper selection (backward), numeric columns as categories",
            f"{SELECT} --direction backward --feature-kind {kinds}", {"feature_kinds": AS_CATEGORIES}, "backward"),
        Run("TAN, MDL-binned numeric columns", "sqlnb fit … --bins mdl --structure tan",
            {"bins": "mdl", "structure": "tan"}),
        # the --all runs
        Run("wrapper selection (forward), numeric columns as categories",
            f"{SELECT} --direction forward --feature-kind {kinds}", {"feature_kinds": AS_CATEGORIES}, "forward",
            tested=False),
        Run("wrapper selection (backward), MDL-binned", f"{SELECT} --direction backward --bins mdl",
            {"bins": "mdl"}, "backward", tested=False),
        Run("wrapper selection (forward), MDL-binned", f"{SELECT} --direction forward --bins mdl",
            {"bins": "mdl"}, "forward", tested=False),
        Run("TAN with wrapper selection (backward), MDL-binned",
            f"{SELECT} --direction backward --bins mdl --structure tan", {"bins": "mdl", "structure": "tan"},
            "backward", tested=False),
        Run("TAN with wrapper selection (forward), MDL-binned",
            f"{SELECT} --direction forward --bins mdl --structure tan", {"bins": "mdl", "structure": "tan"},
            "forward", tested=False),
        Run("TAN on the features of the backward selection, MDL-binned",
            f"{SELECT} --direction backward --bins mdl, then sqlnb fit … --bins mdl --structure tan --features …",
            {"bins": "mdl"}, "backward", tested=False, tan_after=True),
        Run("KDB(1), MDL-binned numeric columns", "sqlnb fit … --bins mdl --structure kdb:1",
            {"bins": "mdl", "structure": "kdb:1"}, tested=False),
        Run("KDB(2), MDL-binned numeric columns", "sqlnb fit … --bins mdl --structure kdb:2",
            {"bins": "mdl", "structure": "kdb:2"}, tested=False),
        Run("KDB(1) with wrapper selection (backward), MDL-binned",
            f"{SELECT} --direction backward --bins mdl --structure kdb:1", {"bins": "mdl", "structure": "kdb:1"},
            "backward", tested=False),
        Run("KDB(2) with wrapper selection (backward), MDL-binned",
            f"{SELECT} --direction backward --bins mdl --structure kdb:2", {"bins": "mdl", "structure": "kdb:2"},
            "backward", tested=False),
        Run("KDB(2) with wrapper selection (forward), MDL-binned",
            f"{SELECT} --direction forward --bins mdl --structure kdb:2", {"bins": "mdl", "structure": "kdb:2"},
            "forward", tested=False),
        Run("KDB(2) on the 8 features of the averaged structures, MDL-binned",
            "sqlnb fit … --bins mdl --structure kdb:2 --features " + ",".join(TAN_BACKWARD),
            {"bins": "mdl", "structure": "kdb:2", "features": TAN_BACKWARD}, tested=False),
    ]


def _query(expr) -> sqlnb.Query:
    return sqlnb.Query(sd.render(expr))


_SELECTIONS: dict = {}


def measure_adult(run: Run, con) -> dict:
    """Fit (or select) on adult.data; error on the complete test rows and on all of them."""
    train = _query(sd.adult_train_query())
    if run.direction is None:
        model, chosen, cv = sqlnb.fit(train, "income", con=con, **run.options), run.options.get("features"), None
    else:
        key = (run.direction, repr(sorted(run.options.items())))
        if key not in _SELECTIONS:  # one search serves the runs that share it
            _SELECTIONS[key] = sqlnb.select_features(train, "income", con=con, direction=run.direction,
                                                     folds=FOLDS, seed=SEED, **run.options)
        s = _SELECTIONS[key]
        model, chosen, cv = s.model, s.features, s.path[s.chosen]["error"]
        if run.tan_after:
            model = sqlnb.fit(train, "income", con=con, features=chosen, structure="tan", **run.options)
    complete = evaluate(model, _query(sd.adult_test_query(drop_missing=True)), con=con)
    every = evaluate(model, _query(sd.adult_test_query()), con=con)
    run.found = {"complete": 1 - complete.accuracy, "complete_rows": complete.labelled_rows,
                 "all": 1 - every.accuracy, "all_rows": every.labelled_rows, "features": chosen, "cv": cv}
    return run.found


def adult_table(runs: list[Run]) -> str:
    lines = ["| model | error, complete test rows | error, all test rows | 10-fold CV error (selection) "
             "| features chosen | command |", "|---|---:|---:|---:|---|---|"]
    for r in runs:
        f = r.found
        chosen = "all 14" if f["features"] is None else f"{len(f['features'])}: " + ", ".join(f["features"])
        cv = "" if f["cv"] is None else f"{100 * f['cv']:.2f} %"
        lines.append(f"| {r.name} | {100 * f['complete']:.2f} % | {100 * f['all']:.2f} % | {cv} | {chosen} "
                     f"| `{r.command}` |")
    return "\n".join(lines)


# -- NB against TAN by cross-validation --------------------------------------------------
#: (data set, how it is read, folds, fit options): the discrete UCI sets as they are,
#: the continuous ones MDL-binned (Fayyad & Irani), as Friedman et al. (1997) discretised.
CV_SETS = [("votes", "shared", 10, {}), ("iris", "sklearn", 5, {"bins": "mdl"}),
           ("wine", "sklearn", 5, {"bins": "mdl"})]
CV_ALL = [("mushroom", "shared", 10, {})]


def _cv_source(name: str, where: str, con) -> tuple[object, str]:
    if where == "shared":
        return _query(sd.query(name)), sd.LABEL_COLUMN[name]
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    table = pa.table({**{c: bunch.data[:, j] for j, c in enumerate(bunch.feature_names)},
                      "class": [str(bunch.target_names[t]) for t in bunch.target]})
    con.register(name, table)
    return name, "class"


def measure_cv(name: str, where: str, folds: int, options: dict, con) -> dict:
    """k-fold CV error (1 − mean fold accuracy) of NB and TAN on the same seeded folds."""
    data, label = _cv_source(name, where, con)
    r = sqlnb.cross_validate(data, label, con=con, folds=folds, seed=SEED, grid={"structure": ["naive", "tan"]},
                             refit=False, **options)
    by = {p["params"]["structure"]: 1 - p["mean_accuracy"] for p in r.results}
    return {"naive": by["naive"], "tan": by["tan"]}


def cv_table(sets, con) -> tuple[str, dict]:
    lines = ["| data set | folds (seed 0) | numeric columns | NB error | TAN error |", "|---|---:|---|---:|---:|"]
    found = {}
    for name, where, folds, options in sets:
        f = found[name] = measure_cv(name, where, folds, options, con)
        numeric = "MDL-binned" if options.get("bins") else "none"
        lines.append(f"| {name} | {folds} | {numeric} | {100 * f['naive']:.2f} % | {100 * f['tan']:.2f} % |")
    return "\n".join(lines), found


# -- the page's blocks -------------------------------------------------------------------
def tested_figures(con=None) -> tuple[str, list[Run], dict]:
    """The tested block (adult's tested runs, then the CV table) and its figures."""
    con = con or duckdb.connect()
    runs = [r for r in adult_runs() if r.tested]
    for r in runs:
        measure_adult(r, con)
    cv, found = cv_table(CV_SETS, con)
    return adult_table(runs) + "\n\n" + cv, runs, found


def all_figures(con=None) -> str:
    con = con or duckdb.connect()
    runs = [r for r in adult_runs() if not r.tested]
    for r in runs:
        measure_adult(r, con)
    return adult_table(runs) + "\n\n" + cv_table(CV_ALL, con)[0]


def shown(text: str, which: str) -> str | None:
    """The text between a block's markers in the page (None when the markers are missing)."""
    start, end = BLOCKS[which]
    m = re.search(re.escape(start) + r"\n(?:(.*?)\n)?" + re.escape(end), text, re.S)
    return (m.group(1) or "") if m else None


def replaced(text: str, which: str, table: str) -> str:
    start, end = BLOCKS[which]
    return re.sub(re.escape(start) + r"\n(?:.*?\n)?" + re.escape(end), lambda _: f"{start}\n{table}\n{end}",
                  text, flags=re.S)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="also the runs too slow for the test")
    ap.add_argument("--write", action="store_true", help=f"rewrite the tables in {DOC.name}")
    args = ap.parse_args()
    con = duckdb.connect()
    tables = {"tested": tested_figures(con)[0]}
    if args.all:
        tables["all"] = all_figures(con)
    text = DOC.read_text()
    for which, table in tables.items():
        print(table, end="\n\n", flush=True)
        text = replaced(text, which, table)
    if args.all:  # adult under the published protocol: too slow for the test
        names = protocol.accepted()
        table = protocol.table([protocol.run(con, "adult", names)], names)
        print(table, flush=True)
        text = protocol.replaced(text, "adult", table)
    if args.write:
        DOC.write_text(text)


if __name__ == "__main__":
    main()
