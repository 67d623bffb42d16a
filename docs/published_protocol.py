"""The published protocol of rmontanana/resultados_ld, run with sqlnb: stratified 5-fold
cross-validation repeated 3 times, numeric columns MDL-discretised on each training fold,
accuracy mean ± standard deviation over the 15 held-out folds.

Imported by docs/generative_figures.py (its ``--all`` block writes adult's row) and by
tests/test_generative_protocol.py (which computes iris and compares it with
docs/generative_adult.md, and recomputes spambase's first fold for the structures that score
in seconds: spambase's whole run, ``python docs/published_protocol.py spambase --write``,
costs minutes, mostly scoring AODE and KDB(2) over 57 features).

What the published side does (read from the repositories, see docs/generative_adult.md,
"Beside published figures"): rmontanana/Platform's ``b_main`` with ``stratified=1``,
``n_folds=5`` and three seeds, its own ``folding::StratifiedKFold``; with ``discretize=1``
each numeric column is cut by MDLP (rmontanana/mdlp) fitted on the training fold only and
applied to the test fold (``Dataset::getTrainTestTensors``); the classifiers are
rmontanana/BayesNet's TAN, KDB (k = 2) and AODE with the default smoothing (``ORIGINAL``:
pseudo-count 1/n of the training rows); the reported std is ``torch::std`` (n − 1).

What this module does: the same folds' *design*, not the same rows per fold (the seeds and
Folding's shuffle are not scikit-learn's): scikit-learn's
``RepeatedStratifiedKFold(n_splits=5, n_repeats=3, random_state=SEED)`` over the rows in
file order, each row's three fold numbers stored beside it in DuckDB; per (repeat, fold)
one ``sqlnb.fit(..., bins="mdl", structure="tan")`` over a filtered SELECT of the training
rows (cut points and counts from those rows only), the other structures derived from that
fit's statistics without reading the rows again (:meth:`NaiveBayes.with_params`; a
structure whose statistics a TAN fit does not hold is fitted on its own), and one
scoring SELECT per structure over the held-out rows, its accuracy averaged in DuckDB
(:func:`accuracy`). Smoothing is sqlnb's default (α = 1).
"""

from __future__ import annotations

import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from sqlglot import exp

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

import sqlnb  # noqa: E402
from sqlnb.errors import SqlnbError  # noqa: E402
from sqlnb.models.naive_bayes.hyperparameters import Hyperparameters  # noqa: E402
from support import shared_data as sd  # noqa: E402

SPLITS, REPEATS, SEED = 5, 3, 0

DOC = ROOT / "docs" / "generative_adult.md"
#: The page's blocks: iris (computed by the test), spambase and adult (by the script; the
#: test recomputes spambase's fold row, :data:`FOLD_ROW`).
BLOCKS = {"tested": ("<!-- published-protocol:start -->", "<!-- published-protocol:end -->"),
          "spambase": ("<!-- published-protocol-spambase:start -->", "<!-- published-protocol-spambase:end -->"),
          "adult": ("<!-- published-protocol-adult:start -->", "<!-- published-protocol-adult:end -->")}

#: The structures compared, in column order: sqlnb's name -> fit options. "aode", "kdb:1"
#: and "kdb:2" are listed for when the installed sqlnb accepts them; until then
#: :func:`accepted` leaves them out with a printed note. Adding one is one line here.
STRUCTURES: dict[str, dict] = {
    "naive": {"structure": "naive"},
    "tan": {"structure": "tan"},
    "aode": {"structure": "aode"},
    "kdb:1": {"structure": "kdb:1"},
    "kdb:2": {"structure": "kdb:2"},
}
LABELS = {"naive": "NB", "tan": "TAN", "aode": "AODE", "kdb:1": "KDB-1", "kdb:2": "KDB-2"}

#: rmontanana/resultados_ld, data/results_compact.txt, the "[100/up]" line (MDLP with no
#: limit on cut points; the "[10/up]" line holds the same figures for these models):
#: AODE-mdlp, KDB-mdlp (k = 2), TAN-mdlp, accuracy mean and std over 5 folds × 3 seeds.
PUBLISHED = {
    "adult": {"rows": 45222, "AODE": (0.8585, 0.0029), "KDB-2": (0.8522, 0.0037), "TAN": (0.8413, 0.0027)},
    "iris": {"rows": 150, "AODE": (0.9356, 0.0570), "KDB-2": (0.9400, 0.0440), "TAN": (0.9422, 0.0388)},
    "spambase": {"rows": 4601, "AODE": (0.9050, 0.0094), "KDB-2": (0.9305, 0.0078), "TAN": (0.9321, 0.0087)},
}
CHEAP = ("iris",)  # computed by the test; spambase and adult by the script (adult also by --all)
SETS = (*CHEAP, "spambase", "adult")
#: spambase's block adds the accuracies of one (repeat, fold), which the test recomputes.
FOLD_ROW = {"spambase": (0, 0)}


def accepted(names=None, out=sys.stdout) -> list[str]:
    """The structures of ``names`` (default: all of :data:`STRUCTURES`) the installed sqlnb
    accepts; each one left out is named on ``out`` with sqlnb's reason."""
    kept = []
    for name in names or STRUCTURES:
        try:
            Hyperparameters(**STRUCTURES[name])
        except SqlnbError as e:
            print(f"note: structure {name!r} left out of the published-protocol table: {e}", file=out)
            continue
        kept.append(name)
    return kept


@dataclass
class DataSet:
    """One data set as a DuckDB table with its rows' fold numbers (columns ``r0``, ``r1``, ...)."""

    name: str
    table: str
    label: str
    features: tuple[str, ...]
    rows: int


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _col(name: str) -> exp.Column:
    return exp.column(_ident(name))


def _load(con, name: str) -> tuple[str, str, tuple[str, ...]]:
    """Create table ``proto_<name>`` (features, label, row_id); return (table, label, features).

    adult: both files' complete rows (45,222: the published row count; the Platform's
    loaders keep complete rows only), is_test dropped. spambase: the 4,601 rows of
    spambase.data. iris: scikit-learn's bundled copy of the UCI file, in its order."""
    table = f"proto_{name}"
    if name == "iris":
        from sklearn import datasets

        bunch = datasets.load_iris()
        features = tuple(bunch.feature_names)
        arrow = pa.table({**{c: bunch.data[:, j] for j, c in enumerate(features)},
                          "class": [str(bunch.target_names[t]) for t in bunch.target],
                          "row_id": np.arange(len(bunch.target), dtype=np.int64)})
        con.register("proto_iris_arrow", arrow)
        source: exp.Expression = exp.select("*").from_(_ident("proto_iris_arrow"))
        label = "class"
    else:
        key = {"adult": "adult", "spambase": "spambase"}[name]
        source = sd.query(key, row_id=True, drop_missing=(name == "adult"))
        label = sd.LABEL_COLUMN[key]
        features = sd.ADULT_FEATURES if name == "adult" else sd.SPAMBASE_FEATURES
    keep = exp.select(*(_col(c) for c in (*features, label, "row_id"))).from_(
        exp.Subquery(this=source, alias=exp.TableAlias(this=_ident("s"))))
    con.execute(exp.Create(this=exp.Table(this=_ident(table)), kind="TABLE", replace=True,
                           expression=keep).sql(dialect="duckdb"))
    return table, label, features


def prepare(con, name: str) -> DataSet:
    """Load ``name`` and add each row's fold in every repeat, as scikit-learn's
    ``RepeatedStratifiedKFold`` deals them over the rows in ``row_id`` order (only the
    labels and row ids come to Python)."""
    from sklearn.model_selection import RepeatedStratifiedKFold

    table, label, features = _load(con, name)
    order = exp.select(_col("row_id"), _col(label)).from_(_ident(table)).order_by(_col("row_id"))
    ids, y = zip(*con.execute(order.sql(dialect="duckdb")).fetchall())
    y = np.asarray([str(v) for v in y])
    folds = np.empty((REPEATS, len(y)), dtype=np.int64)
    splitter = RepeatedStratifiedKFold(n_splits=SPLITS, n_repeats=REPEATS, random_state=SEED)
    for i, (_, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        folds[i // SPLITS, test] = i % SPLITS
    con.register(f"{table}_folds_arrow", pa.table({"row_id": np.asarray(ids, dtype=np.int64),
                                                    **{f"r{r}": folds[r] for r in range(REPEATS)}}))
    joined = exp.select("*").from_(_ident(table)).join(
        exp.Table(this=_ident(f"{table}_folds_arrow")), using=[_ident("row_id")])
    con.execute(exp.Create(this=exp.Table(this=_ident(f"{table}_cv")), kind="TABLE", replace=True,
                           expression=joined).sql(dialect="duckdb"))
    return DataSet(name, f"{table}_cv", label, tuple(features), len(y))


def fold_query(ds: DataSet, repeat: int, fold: int, held_out: bool) -> sqlnb.Query:
    """The training rows (``held_out=False``) or the held-out rows of one fold: features and
    label only, so that neither the row id nor a fold number becomes a feature."""
    cond = _col(f"r{repeat}").eq(exp.Literal.number(fold))
    select = exp.select(*(_col(c) for c in (*ds.features, ds.label))).from_(_ident(ds.table)).where(
        cond if held_out else exp.Not(this=exp.Paren(this=cond)))
    return sqlnb.Query(select.sql(dialect="duckdb"))


@dataclass
class Figures:
    """Held-out accuracies of each structure, one per (repeat, fold), in that order, and
    the structures sqlnb refused on this data set (structure -> its error message)."""

    name: str
    rows: int
    accuracies: dict[str, list[float]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def mean(self, s: str) -> float:
        return statistics.fmean(self.accuracies[s])

    def std(self, s: str) -> float:
        """Sample standard deviation (n − 1), as the published ``torch::std``."""
        return statistics.stdev(self.accuracies[s])


def _fit(train: sqlnb.Query, ds: DataSet, con, structure: str):
    # Every column of the data set is a feature (features= given: nothing screened out),
    # as in the published runs; numeric ones MDL-binned on these training rows.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # notes that repeat on every fold
        return sqlnb.fit(train, ds.label, con=con, features=list(ds.features), bins="mdl", **STRUCTURES[structure])


def _fold_models(train: sqlnb.Query, ds: DataSet, con, names: list[str], refused: dict[str, str]) -> dict:
    """One model per structure of ``names`` on one training fold: one fit gathering the
    richest statistics (TAN's pair counts), the other structures derived from its
    statistics without reading the rows again; a structure they do not suffice for is
    fitted itself. A structure sqlnb refuses goes into ``refused`` with the reason."""
    models: dict = {}
    base = None
    for s in [n for n in ("tan", *names) if n in names and n not in refused]:
        try:
            if base is None:
                base = models[s] = _fit(train, ds, con, s)
                continue
            try:
                models[s] = base.with_params(**STRUCTURES[s])
            except SqlnbError:  # statistics the base fit does not hold
                models[s] = _fit(train, ds, con, s)
        except SqlnbError as e:
            refused[s] = str(e).splitlines()[0]
    return models


def accuracy(model, test: sqlnb.Query, label: str, con) -> float:
    """Held-out accuracy: the model's one scoring SELECT with the label kept, averaged in
    DuckDB (the rows stay there). The same figure as ``evaluate(...).accuracy`` (checked
    by tests/test_generative_protocol.py) at a third of its cost: no confusion cells."""
    import duckdb

    scored = model.score(test, con=con, outputs=("prediction",), keep=[label])
    hit = duckdb.CaseExpression(duckdb.ColumnExpression("prediction") == duckdb.ColumnExpression(label),
                                duckdb.ConstantExpression(1.0)).otherwise(duckdb.ConstantExpression(0.0))
    return float(scored.aggregate([duckdb.FunctionExpression("avg", hit)]).fetchall()[0][0])


def run(con, name: str, names: list[str], folds: list[tuple[int, int]] | None = None) -> Figures:
    """The 15 held-out accuracies of every structure in ``names`` on data set ``name`` (or
    those of the (repeat, fold)s in ``folds`` only, in that order)."""
    start = time.perf_counter()
    ds = prepare(con, name)
    found = Figures(name, ds.rows)
    for r, k in folds if folds is not None else [(r, k) for r in range(REPEATS) for k in range(SPLITS)]:
        models = _fold_models(fold_query(ds, r, k, held_out=False), ds, con, names, found.refused)
        test = fold_query(ds, r, k, held_out=True)
        for s, model in models.items():
            found.accuracies.setdefault(s, []).append(accuracy(model, test, ds.label, con))
    found.seconds = time.perf_counter() - start
    return found


def _cell(pair) -> str:
    return "" if pair is None else f"{pair[0]:.4f} ± {pair[1]:.4f}"


def columns_of(names: list[str]) -> list[str]:
    """The table's columns: the published models and the structures of ``names``, in
    :data:`STRUCTURES`' order (AODE, KDB-1, KDB-2, TAN, NB)."""
    shown = {"AODE", "KDB-2", "TAN"} | {LABELS[s] for s in names}
    order = [LABELS[s] for s in ("aode", "kdb:1", "kdb:2", "tan", "naive")]
    return [c for c in order if c in shown]


def table(figures: list[Figures], names: list[str]) -> str:
    """The page's table: per data set, the published row, then sqlnb's under this protocol."""
    lines = []
    columns = columns_of(names)
    head = ["data set (rows)", "figures", *columns]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|---|---|" + "---:|" * len(columns))
    for f in figures:
        pub = PUBLISHED[f.name]
        lines.append(f"| {f.name} ({pub['rows']:,}) | published (BayesNet) | "
                     + " | ".join(_cell(pub.get(c)) for c in columns) + " |")
        ours = {LABELS[s]: _cell((f.mean(s), f.std(s))) for s in names if s in f.accuracies}
        ours |= {LABELS[s]: "refused¹" for s in f.refused}
        lines.append(f"| {f.name} ({f.rows:,}) | sqlnb | " + " | ".join(ours.get(c, "") for c in columns) + " |")
        if f.name in FOLD_ROW:
            lines.append(fold_row(f, names, columns))
    return "\n".join(lines)


def fold_row(f: Figures, names: list[str], columns: list[str], at: int | None = None) -> str:
    """The row of one (repeat, fold)'s accuracies (:data:`FOLD_ROW`), at position ``at`` of
    ``f``'s accuracies (default: its place among the 15)."""
    r, k = FOLD_ROW[f.name]
    i = r * SPLITS + k if at is None else at
    cells = {LABELS[s]: f"{f.accuracies[s][i]:.4f}" for s in names if s in f.accuracies}
    return (f"| {f.name} ({f.rows:,}) | sqlnb, repeat {r + 1} fold {k + 1} | "
            + " | ".join(cells.get(c, "") for c in columns) + " |")


def shown(text: str, which: str) -> str | None:
    """The text between a block's markers in the page (None when the markers are missing)."""
    start, end = BLOCKS[which]
    m = re.search(re.escape(start) + r"\n(?:(.*?)\n)?" + re.escape(end), text, re.S)
    return (m.group(1) or "") if m else None


def replaced(text: str, which: str, table: str) -> str:
    start, end = BLOCKS[which]
    return re.sub(re.escape(start) + r"\n(?:.*?\n)?" + re.escape(end), lambda _: f"{start}\n{table}\n{end}",
                  text, flags=re.S)


def main() -> None:  # pragma: no cover - a manual run
    import argparse

    import duckdb

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", default=list(SETS), choices=SETS)
    ap.add_argument("--write", action="store_true", help=f"rewrite the blocks computed in {DOC.name}")
    args = ap.parse_args()
    con = duckdb.connect()
    names = accepted()
    figures = {}
    for s in args.sets:
        figures[s] = run(con, s, names)
        print(f"{s}: {figures[s].seconds:.1f} s", file=sys.stderr)
        for structure, why in figures[s].refused.items():
            print(f"{s}: {structure} refused: {why}", file=sys.stderr)
    blocks = {"tested": [figures[s] for s in CHEAP if s in figures],
              **{s: [figures[s]] for s in ("spambase", "adult") if s in figures}}
    text = DOC.read_text()
    for which, found in blocks.items():
        if found:
            print(table(found, names), end="\n\n")
            if which != "tested" or len(found) == len(CHEAP):  # a block is written whole
                text = replaced(text, which, table(found, names))
    if args.write:
        DOC.write_text(text)


if __name__ == "__main__":  # pragma: no cover
    main()
