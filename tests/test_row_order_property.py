"""Property: one row in, one row out, in the input's order, scored with the fitted types.

For every model kind and feature layout (Gaussian, categorical, Bernoulli, multinomial,
complement, token bags in a text column as multinomial and Bernoulli, a mixed model,
LDA, QDA, logistic regression; the long token layout has its own test) and every
output (Parquet, CSV, standard output, a DuckDB table, the Python relation), one
hypothesis property draws the kind, the output, a source shape (one row group, many row
groups, a glob of several files, types that drift between the files, types that differ
between fit and score), the number of row groups (1 to 40), the number of DuckDB threads
(1 to 8), the row count (1 to 3,000) and the data. Each draw checks

* the output has exactly the input's rows, in order (a unique row index ``rid``);
* ``--keep ''`` (predictions only) lines up with the input by position;
* the probabilities equal those of the same rows cast to the fitted types, scored from
  an in-memory table (within 1e-12).

Beside the random draws, a fixed sweep scores every pair of kind × output, kind × shape
and output × shape at least once (a Latin square: 55 runs of 5,000 rows, 4 threads).
The CI profile runs the property's 150 examples under a fixed seed; ``HYPOTHESIS_PROFILE=long``
runs ten times as many with fresh draws (tests/support/hypothesis_profiles.py).

A kind added later belongs in ``KINDS``.
"""

from __future__ import annotations

import csv
import io

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import sqlnb
from support.cli import invoke
from support.hypothesis_profiles import examples

#: kind -> fit arguments (every fit reads the same training file).
KINDS = {
    "gaussian": dict(features=["g1", "g2"]),
    "categorical": dict(features=["c1", "c2"], feature_kinds={"c2": "categorical"}),
    "bernoulli": dict(features=["b1", "n1"], feature_kinds={"n1": "bernoulli"}),
    "multinomial": dict(features=["n1", "n2"], kind="multinomial"),
    "complement": dict(features=["n1", "n2"], kind="complement"),
    "text_multinomial": dict(features=["body"], feature_kinds={"body": "multinomial"}),
    "text_bernoulli": dict(features=["body", "b1"], feature_kinds={"body": "bernoulli"}),
    "mixed": dict(features=["g1", "c1", "b1", "n1", "c2"], feature_kinds={"c2": "categorical"}),
    "lda": dict(model="lda", features=["g1", "g2"]),
    "qda": dict(model="qda", features=["g1", "g2"]),
    "logistic": dict(model="logistic", features=["g1", "g2"]),
}
OUTPUTS = ("parquet", "csv", "stdout", "duckdb", "python")
SHAPES = ("one_group", "many_groups", "glob", "drift_between_files", "drift_fit_to_score")
DENSE = ("lda", "qda", "logistic")
WORDS = np.array(["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"])


def rows(n: int, seed: int, complete: bool = False) -> pa.Table:
    """Features of every kind that depend on a 3-class label; NULLs unless ``complete``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)

    def holes(a, typ):
        mask = None if complete else rng.random(n) < 0.05
        return pa.array(a, typ, mask=mask)

    body = [" ".join(WORDS[(2 * k + rng.integers(0, 4, rng.integers(1, 6))) % 8]) for k in y]
    return pa.table({
        "rid": pa.array(np.arange(n), pa.int64()),
        "g1": holes(rng.normal(y, 1.0), pa.float64()),
        "g2": holes(rng.normal(-0.5 * y, 2.0), pa.float64()),
        "c1": holes([f"v{v}" for v in (y + rng.integers(0, 3, n)) % 6], pa.string()),
        "c2": holes((y * 3 + rng.integers(0, 4, n)) % 9, pa.int64()),
        "b1": holes(rng.random(n) < 0.2 + 0.3 * y, pa.bool_()),
        "n1": holes(rng.poisson(1 + y).astype(float), pa.float64()),
        "n2": holes(rng.poisson(3 - y).astype(float), pa.float64()),
        "body": holes(body, pa.string()),
        "y": pa.array([f"k{v}" for v in y]),
    })


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """Every kind fitted once on the same 3,000 rows, saved in one DuckDB file."""
    d = tmp_path_factory.mktemp("fitted")
    train = d / "train.parquet"
    pq.write_table(rows(3_000, seed=1), train)
    complete = d / "complete.parquet"
    pq.write_table(rows(3_000, seed=1, complete=True), complete)
    db = d / "models.duckdb"
    models = {}
    for kind, args in KINDS.items():
        m = sqlnb.fit(str(complete if kind in DENSE else train), "y", **args)
        m.save(str(db), kind)
        models[kind] = m
    return db, models


def write_source(table: pa.Table, shape: str, d, groups: int | None = None) -> tuple[str, pa.Table]:
    """Write ``table`` in ``shape``; returns the DATA argument and the rows as they are
    scored (in order). ``groups``: the row groups of a many-group file (12 when None) and,
    split over the three files, of a glob (4 per file when None)."""
    n = table.num_rows
    if shape == "one_group":
        pq.write_table(table, d / "s.parquet", row_group_size=max(1, n))
        return str(d / "s.parquet"), table
    if shape == "many_groups":
        pq.write_table(table, d / "s.parquet", row_group_size=per_group(n, max(2, groups or 12)))
        return str(d / "s.parquet"), table
    if shape in ("glob", "drift_between_files"):
        (d / "g").mkdir()
        cuts = [0, n // 3, 2 * n // 3, n]
        for i in range(3):
            part = table.slice(cuts[i], cuts[i + 1] - cuts[i])
            if shape == "drift_between_files" and i == 1:
                # The middle file holds whole numbers as BIGINT and its columns in another order.
                part = part.set_column(part.schema.get_field_index("n1"), "n1", pc_round(part.column("n1")))
                part = part.select(list(reversed(part.column_names)))
            elif shape == "drift_between_files":
                part = part.set_column(part.schema.get_field_index("n1"), "n1",
                                       pc_round(part.column("n1")).cast(pa.float64()))
            per_file = 4 if groups is None else -(-groups // 3)
            pq.write_table(part, d / "g" / f"part-{i}.parquet", row_group_size=per_group(part.num_rows, per_file))
        scored = table
        if shape == "drift_between_files":
            scored = table.set_column(table.schema.get_field_index("n1"), "n1",
                                      pc_round(table.column("n1")).cast(pa.float64()))
        return str(d / "g" / "*.parquet"), scored
    # drift_fit_to_score: a CSV, whose reader types the columns its own way (n1, n2 and c2
    # as BIGINT, b1 as BOOLEAN; the model was fitted on DOUBLE counts).
    rounded = table
    for name in ("n1", "n2"):
        rounded = rounded.set_column(rounded.schema.get_field_index(name), name, pc_round(rounded.column(name)))
    pcsv.write_csv(rounded, d / "s.csv")
    return str(d / "s.csv"), rounded


def per_group(n: int, groups: int) -> int:
    """Rows per row group that cut ``n`` rows into ``groups`` groups (fewer when n < groups)."""
    return max(1, -(-n // groups))


def row_groups(data: str) -> int:
    """Row groups the scorer reads (0 for a CSV): the figure the property records."""
    if data.endswith(".csv"):
        return 0
    import glob
    return sum(pq.ParquetFile(f).num_row_groups for f in glob.glob(data))


def pc_round(column: pa.ChunkedArray) -> pa.ChunkedArray:
    import pyarrow.compute as pc
    return pc.round(column).cast(pa.int64())


def expected_scores(model, scored: pa.Table) -> dict:
    """The same rows cast to the fitted types, scored from an in-memory table."""
    if model.kind == "naive_bayes":
        types = {f.name: f.sql_type for f in model.features}
    else:  # LDA, QDA, logistic regression read every feature as DOUBLE
        types = {name: "DOUBLE" for name in model.feature_names}
    con = duckdb.connect()
    con.register("raw", scored)
    casts = ", ".join(f'CAST("{c}" AS {types[c]}) AS "{c}"' if c in types else f'"{c}"' for c in scored.column_names)
    con.execute(f"CREATE TABLE typed AS SELECT {casts} FROM raw")
    got = model.score("typed", con, keep=["rid"], outputs=("proba", "prediction")).to_arrow_table()
    return got.sort_by("rid").to_pydict()


def run_output(output: str, data: str, model_ref: str, threads: int, keep: str, d, model) -> dict:
    """Score through one output; the rows as a column dict, in output order."""
    base = ["--threads", str(threads), "score", data, "--model", model_ref, "--keep", keep]
    if output == "python":
        con = duckdb.connect(config={"threads": threads})
        return model.score(data, con, keep=[keep] if keep else [], outputs=("proba", "prediction")
                           ).to_arrow_table().to_pydict()
    if output == "stdout":
        r = invoke(*base, "--out", "-")
        assert r.exit_code == 0, r.stderr
        return _csv_columns(r.stdout)
    target = {"parquet": d / f"o-{keep or 'none'}.parquet", "csv": d / f"o-{keep or 'none'}.csv",
              "duckdb": f"{d / 'o.duckdb'}:o_{keep or 'none'}"}[output]
    r = invoke(*base, "--out", target, "--replace")
    assert r.exit_code == 0, r.stderr
    if output == "duckdb":
        path, table = str(target).rsplit(":", 1)
        with duckdb.connect(path, read_only=True) as con:
            return con.sql(f'SELECT * FROM "{table}"').to_arrow_table().to_pydict()
    return duckdb.sql(f"SELECT * FROM '{target}'").to_arrow_table().to_pydict()


def _csv_columns(text: str) -> dict:
    reader = list(csv.DictReader(io.StringIO(text)))
    return {c: [r[c] for r in reader] for c in (reader[0].keys() if reader else [])}


def check(kind, output, shape, threads, n, seed, fitted, d, groups=None):
    db, models = fitted
    model = models[kind]
    table = rows(n, seed, complete=kind in DENSE)
    data, scored = write_source(table, shape, d, groups)
    if groups is not None:  # a hypothesis draw: record what it reached
        read = row_groups(data)
        event("row groups read: " + ("CSV" if shape == "drift_fit_to_score" else bucket(read, (1, 2, 5, 10, 20, 30))))
        event(f"10+ row groups and 2+ threads: {read >= 10 and threads >= 2}")
    want = expected_scores(model, scored)
    ref = f"{db}:{kind}"

    got = run_output(output, data, ref, threads, "rid", d, model)
    assert [int(v) for v in got["rid"]] == list(range(n)), f"{kind} {output} {shape}: rows out of order"
    for col in model.proba_columns():
        a = np.array([np.nan if v in (None, "") else float(v) for v in got[col]])
        b = np.array([np.nan if v is None else v for v in want[col]], dtype=float)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=f"{kind} {output} {col}")
    assert [str(v) if v not in (None, "") else None for v in got["prediction"]] == \
        [str(v) if v is not None else None for v in want["prediction"]]

    bare = run_output(output, data, ref, threads, "", d, model)
    assert len(bare["prediction"]) == n
    assert [str(v) if v not in (None, "") else None for v in bare["prediction"]] == \
        [str(v) if v is not None else None for v in want["prediction"]], f"{kind} {output} {shape}: misaligned"


def bucket(v: int, edges) -> str:
    """``v``'s bucket among ``edges`` (lower bounds), as "lo-hi" or "lo+" for the last."""
    lo = max(e for e in edges if e <= v)
    hi = [e for e in edges if e > lo]
    return f"{lo}+" if not hi else (f"{lo}" if hi[0] == lo + 1 else f"{lo}-{hi[0] - 1}")


# Drawn from lists and by magnitude rather than as plain integers, which hypothesis draws
# mostly small (st.integers(1, 40) gave fewer than 10 row groups in half of 150 draws).
GROUPS = (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40)
THREADS = (1, 2, 3, 4, 6, 8)
ROWS = st.one_of(st.integers(1, 99), st.integers(100, 999), st.integers(1_000, 3_000))


@settings(max_examples=examples(150))
@given(kind=st.sampled_from(list(KINDS)), output=st.sampled_from(OUTPUTS), shape=st.sampled_from(SHAPES),
       groups=st.sampled_from(GROUPS), threads=st.sampled_from(THREADS), n=ROWS, seed=st.integers(0, 2**16))
def test_every_output_keeps_the_rows(kind, output, shape, groups, threads, n, seed, fitted, tmp_path_factory):
    """One property over kind × output × shape × row groups × threads × rows."""
    event(f"kind: {kind}")
    event(f"output: {output}")
    event(f"shape: {shape}")
    event(f"threads: {threads}")
    event("rows: " + bucket(n, (1, 10, 100, 500, 1_000, 2_000)))
    check(kind, output, shape, threads, n, seed, fitted, tmp_path_factory.mktemp("draw"), groups=groups)


SWEEP = [(kind, output, SHAPES[(i + j) % len(SHAPES)])
         for i, kind in enumerate(KINDS) for j, output in enumerate(OUTPUTS)]


@pytest.mark.parametrize(("kind", "output", "shape"), SWEEP)
def test_every_pair_of_kind_output_and_shape_keeps_the_rows(kind, output, shape, fitted, tmp_path):
    """Each kind × output once, the shape turning with both (i + j mod 5), so every
    kind × shape and output × shape pair comes up too: 5,000 rows, 4 threads, 12 row groups
    in the many-group file."""
    check(kind, output, shape, 4, 5_000, 7, fitted, tmp_path)


def test_the_sweep_covers_every_pair():
    pairs = lambda a, b: {(t[a], t[b]) for t in SWEEP}  # noqa: E731
    assert len(SWEEP) == len(KINDS) * len(OUTPUTS)
    assert pairs(0, 2) == {(k, s) for k in KINDS for s in SHAPES}
    assert pairs(1, 2) == {(o, s) for o in OUTPUTS for s in SHAPES}


def test_long_token_tables_score_documents_in_order_of_their_first_token(tmp_path):
    rng = np.random.default_rng(3)
    docs = 2_000
    y = rng.integers(0, 3, docs)
    order = rng.permutation(docs)  # documents appear in the token table in this order
    tok = [(int(i), str(WORDS[(2 * y[i] + j) % 8]), int(rng.integers(1, 4))) for i in order for j in range(3)]
    tokens = pa.table({"doc": [t[0] for t in tok], "tok": [t[1] for t in tok], "n": [t[2] for t in tok]})
    labels = pa.table({"doc": np.arange(docs), "y": [f"k{v}" for v in y]})
    pq.write_table(tokens, tmp_path / "tokens.parquet", row_group_size=500)
    m = sqlnb.fit_long(tokens, labels, id="doc", token="tok", count="n", label="y")
    con = duckdb.connect(config={"threads": 4})
    got = m.score_long(str(tmp_path / "tokens.parquet"), con=con).fetchnumpy()["doc"]
    assert got.tolist() == order.tolist()
    # With a document table, its order.
    pq.write_table(labels.select(["doc"]), tmp_path / "docs.parquet", row_group_size=100)
    got = m.score_long(str(tmp_path / "tokens.parquet"), str(tmp_path / "docs.parquet"), con=con).fetchnumpy()["doc"]
    assert got.tolist() == list(range(docs))
