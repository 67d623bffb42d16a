"""Text benchmark: sqlnb's long-layout multinomial naive Bayes against scikit-learn.

Both read the same Parquet files written by ``generate.py --shape text`` (a token table of
(doc_id, token, n) rows and a docs table of (doc_id, label)):

sklearn
    ``baselines.load_text``: pyarrow read + CSR count matrix (what ``CountVectorizer``
    hands over), then ``MultinomialNB().fit`` and in-memory ``predict_proba``.
sqlnb
    ``sqlnb.fit_long`` (one ``GROUP BY label, token`` over the token table joined to the
    labels, plus the class counts) and ``model.score_long`` (tokens ⋈ one parameter row per
    term, grouped by document, LEFT JOINed to the docs), its probabilities fetched as an
    Arrow table (300k × 20 doubles, like the array ``predict_proba`` returns).

End-to-end = read + vectorize + fit + predict_proba for scikit-learn, fit + score for
sqlnb. Each step is timed ``--repeat`` times, interleaved; the table reports the median
and min. The probabilities of both are compared (max absolute difference).

Examples
--------
python benchmarks/text_bench.py --docs 300000 --vocab 50000 --classes 20 --repeat 3
python benchmarks/text_bench.py --docs 300000 --vocab 50000 --classes 20 --repeat 3 --write-readme
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import baselines  # noqa: E402
import generate  # noqa: E402

import sqlnb  # noqa: E402

README = HERE / "README.md"
NOTES = """Where sqlnb's time goes (quiet machine, DuckDB's two threads, 13.6M token rows, K = 20;
each query's result summed so that every class column is computed). Scoring is one hash join
of the token rows to one parameter row per term holding all K classes' weights, one
`GROUP BY doc` with K sums, and the log-sum-exp finish: the join alone 0.35 s, gathering the
20 weight columns for every token row 0.8–1.1 s, with the 20 products `n·w` 1.2–1.5 s, with
the `GROUP BY doc` 2.0 s; the same 20-sum `GROUP BY doc` without any join already costs
1.2–1.4 s. So the join and the K sums are the floor here, and K live sums per token row
in a column-at-a-time engine stay ~5× behind scikit-learn's single-threaded CSR × dense
product (20 multiply-adds per non-zero on contiguous rows). (DuckDB drops aggregates nobody
reads: a query that consumes only a few class columns looks much cheaper than full
scoring.) Fitting is one `GROUP BY label, token` over the token rows joined to the labels
(943,871 groups); with the default vocabulary options no second pruning statement runs.
"""


def sklearn_steps(meta: dict) -> dict:
    """Seconds of scikit-learn's load (read + CSR), fit and predict_proba; and the model."""
    from sklearn.naive_bayes import MultinomialNB

    t0 = time.perf_counter()
    X, y = baselines.load_text(meta)
    t1 = time.perf_counter()
    model = MultinomialNB().fit(X, y)
    t2 = time.perf_counter()
    proba = model.predict_proba(X)
    t3 = time.perf_counter()
    return {"load": t1 - t0, "fit": t2 - t1, "predict_proba": t3 - t2, "proba": proba}


def sqlnb_steps(meta: dict) -> dict:
    """Seconds of sqlnb's fit_long and score_long (probabilities fetched as Arrow)."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    tokens, docs = sqlnb.Files(meta["globs"]["tokens"]), sqlnb.Files(meta["globs"]["docs"])
    t0 = time.perf_counter()
    model = sqlnb.fit_long(tokens, docs, id="doc_id", token="token", count="n", label=meta["label"], con=con)
    t1 = time.perf_counter()
    table = model.score_long(tokens, docs, con=con, outputs=("proba",), keep=["doc_id"]).to_arrow_table()
    t2 = time.perf_counter()
    con.close()
    return {"fit": t1 - t0, "score": t2 - t1, "table": table, "model": model}


def summary(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} / {min(times):.2f}"


def run(docs: int, vocab: int, classes: int, repeat: int) -> str:
    out = HERE / "data" / f"text-r{docs}-d{vocab}-k{classes}-s0-f1"
    meta = generate.load_or_generate("text", docs, vocab, classes, out, seed=0, files=1)
    sk: dict[str, list[float]] = {"load": [], "fit": [], "predict_proba": [], "total": []}
    us: dict[str, list[float]] = {"fit": [], "score": [], "total": []}
    for _ in range(repeat):
        a = sklearn_steps(meta)
        for k in ("load", "fit", "predict_proba"):
            sk[k].append(a[k])
        sk["total"].append(a["load"] + a["fit"] + a["predict_proba"])
        b = sqlnb_steps(meta)
        us["fit"].append(b["fit"])
        us["score"].append(b["score"])
        us["total"].append(b["fit"] + b["score"])
    # Parity: sklearn's rows follow the docs table, its classes the label dictionary.
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    d = pq.read_table(baselines._files(meta["globs"]["docs"]))
    labels = pc.dictionary_encode(d[meta["label"]].combine_chunks()).dictionary.to_pylist()
    order = [labels.index(c) for c in b["model"].classes]
    ours = b["table"].sort_by("doc_id")
    ref = a["proba"][np.argsort(d["doc_id"].to_numpy(), kind="stable")][:, order]
    got = np.column_stack([ours[c].to_numpy() for c in b["model"].proba_columns()])
    diff = float(np.max(np.abs(got - ref)))
    load = os.getloadavg()[0]
    rows = meta["rows"]
    lines = [
        f"`python benchmarks/text_bench.py --docs {docs} --vocab {vocab} --classes {classes} --repeat {repeat}`",
        "",
        f"{rows['docs']:,} documents, {rows['tokens']:,} token rows, vocabulary {vocab:,}, {classes} classes; "
        f"{os.cpu_count()} cores, load average {load:.1f} at the end; seconds, median / min of {repeat}; "
        f"max |Δ probability| sqlnb vs scikit-learn = {diff:.1e}.",
        "",
        "| step | scikit-learn | sqlnb | ratio (sklearn / sqlnb, medians) |",
        "|---|---|---|---|",
        f"| read + vectorize (pyarrow → CSR) | {summary(sk['load'])} | — | |",
        f"| fit | {summary(sk['fit'])} | {summary(us['fit'])} (`fit_long`, from Parquet) | |",
        f"| predict_proba / score (in-memory vs from Parquet) | {summary(sk['predict_proba'])} | "
        f"{summary(us['score'])} (`score_long`, to Arrow) | "
        f"{statistics.median(sk['predict_proba']) / statistics.median(us['score']):.2f} |",
        f"| end-to-end: read + vectorize + fit + predict_proba | {summary(sk['total'])} | "
        f"{summary(us['total'])} | {statistics.median(sk['total']) / statistics.median(us['total']):.2f} |",
    ]
    return "\n".join(lines)


def write_readme(table: str) -> None:
    """Put ``table`` under the README's ``## Text`` heading (replacing that section only)."""
    text = README.read_text() if README.exists() else "# sqlnb benchmarks\n"
    section = ("## Text\n\nsqlnb's long-layout multinomial naive Bayes (`sqlnb.fit_long` + `score_long`) "
               "against scikit-learn's CSR + `MultinomialNB` on the same Parquet files "
               "(see `text_bench.py`).\n\n" + table + "\n\n" + NOTES)
    pattern = re.compile(r"^## Text\n.*?(?=^## |^<!-- results |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    README.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("Examples"):],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=300_000)
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-readme", action="store_true", help="store the table under '## Text' in README.md")
    a = ap.parse_args(argv)
    table = run(a.docs, a.vocab, a.classes, a.repeat)
    print(table)
    if a.write_readme:
        write_readme(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
