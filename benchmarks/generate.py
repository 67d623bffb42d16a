"""Synthetic Parquet data sets for the sqlnb benchmarks, generated inside DuckDB.

Every value comes from DuckDB's ``hash()`` of (row number, seed, stream), never from a Python
row loop and never from ``random()``: ``random()`` draws from per-thread states, so its output
depends on the thread count and scheduling, while ``hash()`` gives the same bits for the same
seed on any machine running the same DuckDB version, whatever the thread count or ``--files``.
On the 2-core VM: 1M x 20 wide rows ~3 s; 10M ~30-50 s, about half of it writing 1.5 GB of
incompressible DOUBLE Parquet.

Shapes (``label`` is always VARCHAR ``'c0'``, ``'c1'``, ... zero-padded to a common width, so
code-point order equals numeric order; classes are drawn uniformly):

wide
    ``x0 .. x{d-1}`` DOUBLE. ``x_j | c ~ mu_cj + sigma_cj * z`` with ``mu_cj ~ N(0, 1)`` and
    ``sigma_cj = exp(U(-0.5, 0.5))``; ``z`` is a smoothed binomial (popcount of 48 hash bits
    plus a uniform jitter, standardised): mean 0, variance 1, excess kurtosis -0.04, |z| < 7.
mixed
    ``ceil(d/2)`` such DOUBLE columns ``x*`` and ``floor(d/2)`` VARCHAR columns ``c*``.
categorical
    ``c0 .. c{d-1}`` VARCHAR with ``n_j`` in 3..50 levels ``'v0' .. 'v{n_j-1}'``. The level is
    ``(floor(n_j * u ** p_cj) + s_cj) mod n_j``: a skewed distribution whose shape (``p_cj`` in
    [1, 3]) and offset (``s_cj``) depend on the class. ``--skew LO HI`` draws ``p_cj`` in
    [LO, HI] instead: level ``m`` then has probability ``((m + 1)^{1/p} − m^{1/p}) / n^{1/p}``,
    about ``m^{1/p − 1}``, a Zipf-like head (``--skew 6 12``: over half the rows of a column
    at its first level), so rows repeat a few value combinations.
text
    ``docs/`` holds (doc_id BIGINT, label); ``tokens/`` holds (doc_id BIGINT, token VARCHAR,
    n BIGINT), one row per distinct token of a document. ``--rows`` is the number of documents,
    ``--features`` the vocabulary size V. Each document makes 10..92 draws (mean 51) of a
    Zipf(1) rank ``r = floor((V+1) ** u)``; 30 % of the draws are shifted by ``k * V / K`` so
    every class has its own frequent terms. Tokens are ``'w<term id>'``. 300k documents with
    V = 50k and K = 20 give about 13.6M token rows.

``--weights`` adds a sample-weight column ``w`` (DOUBLE, uniform in (0.5, 1.5)) to the
non-text shapes.

SQL is built as sqlglot trees (identifiers quoted, arithmetic constants DOUBLE); only integer
hash inputs (seed, stream number) and integer moduli are integer literals. Generator
parameters (means, levels, ...) come from ``numpy.random.default_rng(seed)``.

Output: ``OUT/part-00000.parquet ...`` (``OUT/docs/`` and ``OUT/tokens/`` for text) and
``OUT/meta.json``, written last, describing the columns, globs and sizes.

Examples
--------
python benchmarks/generate.py --shape wide --rows 10000000 --features 20 --classes 3 --out /tmp/w
python benchmarks/generate.py --shape text --rows 300000 --features 50000 --classes 20 --out /tmp/t
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
from sqlglot import exp

SHAPES = ("wide", "mixed", "categorical", "text")
LABEL = "label"
WEIGHT = "w"
TEXT_DRAWS = (10, 92)  # draws per document, inclusive range (mean 51 -> ~45 distinct tokens)
TEXT_TOPIC_SHARE = 0.3  # share of draws taken from the class-specific vocabulary shift


# --- small sqlglot helpers --------------------------------------------------------------------


def col(name: str) -> exp.Column:
    """Quoted column reference."""
    return exp.column(name, quoted=True)


def dbl(value: float) -> exp.Cast:
    """A DOUBLE literal (a bare ``0.5`` is DECIMAL in DuckDB)."""
    return exp.cast(exp.Literal.number(repr(float(value))), exp.DataType.Type.DOUBLE)


def to_double(e: exp.Expression) -> exp.Cast:
    """``CAST(e AS DOUBLE)``."""
    return exp.cast(e, exp.DataType.Type.DOUBLE)


def hash_bits(row: exp.Expression, seed: int, stream: int, *extra: exp.Expression) -> exp.Expression:
    """64 pseudo-random bits: ``hash(hash(row, seed, stream, *extra))`` (UBIGINT).

    The outer ``hash`` is needed. DuckDB combines the hashes of several arguments linearly in the
    last one, so ``hash(i, seed, 1) XOR hash(i, seed, 2)`` is the same constant for every row:
    without rehashing, every feature stream (and the class stream) is the same 64 bits XORed with
    a constant, and the "independent" features are deterministic functions of one another (10M
    categorical rows held 1,154 distinct feature combinations; within-class correlations of the
    wide features reached 0.24). The one-argument ``hash`` of a UBIGINT is a multiply/xor-shift
    finaliser, which breaks that relation (``tests/test_benchmarks_smoke.py`` checks it).
    """
    args = [row, exp.Literal.number(int(seed)), exp.Literal.number(int(stream)), *extra]
    return exp.Anonymous(this="hash", expressions=[exp.Anonymous(this="hash", expressions=args)])


def uniform(bits: exp.Expression) -> exp.Expression:
    """Uniform in the open interval (0, 1) from the top 52 bits of ``bits``.

    ``(top + 0.5) / 2**52`` is exact in DOUBLE, so it never rounds to 0 or 1.
    """
    top = exp.BitwiseRightShift(this=bits, expression=exp.Literal.number(12))
    return exp.paren(to_double(top) + dbl(0.5)) * dbl(2.0**-52)


def gaussian(bits: exp.Expression) -> exp.Expression:
    """Approximately standard normal from 64 bits, cheaply.

    ``popcount(top 48 bits)`` is Binomial(48, 1/2) (mean 24, variance 12); adding the low 16 bits
    as a uniform in (-1/2, 1/2) makes it continuous (variance 12 + 1/12). About 5x cheaper than a
    Box-Muller (``ln``, ``sqrt``, ``cos``) in DuckDB, which costs ~11 s for 10M x 20.
    """
    pop = to_double(exp.func("bit_count", exp.BitwiseRightShift(this=bits, expression=exp.Literal.number(16))))
    low = to_double(exp.BitwiseAnd(this=bits, expression=exp.Literal.number(65535)))
    jitter = (low + dbl(0.5)) * dbl(1.0 / 65536.0) - dbl(0.5)
    return exp.paren(pop - dbl(24.0) + jitter) * dbl(1.0 / math.sqrt(12.0 + 1.0 / 12.0))


def pick(values, index: exp.Expression) -> exp.Bracket:
    """``[v0, v1, ...][index + 1]``: per-class constant looked up by the 0-based class index."""
    return exp.Bracket(
        this=exp.Array(expressions=[dbl(v) for v in values]),
        expressions=[index + exp.Literal.number(1)],
    )


def class_index(row: exp.Expression, seed: int, classes: int) -> exp.Expression:
    """0-based class index (BIGINT: list indexing rejects UBIGINT), uniform over ``classes``."""
    return exp.cast(exp.Mod(this=hash_bits(row, seed, 0), expression=exp.Literal.number(int(classes))), exp.DataType.Type.BIGINT)


def class_label(index: exp.Expression, classes: int) -> exp.Expression:
    """``'c' || lpad(index, width, '0')``."""
    width = len(str(classes - 1))
    text = exp.func("lpad", exp.cast(index, exp.DataType.Type.VARCHAR), exp.Literal.number(width), exp.Literal.string("0"))
    return exp.DPipe(this=exp.Literal.string("c"), expression=text)


def prefixed(prefix: str, number: exp.Expression) -> exp.DPipe:
    """``prefix || CAST(CAST(number AS BIGINT) AS VARCHAR)``: an integer-valued DOUBLE as a level name."""
    text = exp.cast(exp.cast(number, exp.DataType.Type.BIGINT), exp.DataType.Type.VARCHAR)
    return exp.DPipe(this=exp.Literal.string(prefix), expression=text)


def parquet_table(glob: str) -> exp.Table:
    """``read_parquet('glob')``; the glob is rendered as an escaped string literal."""
    return exp.Table(this=exp.Anonymous(this="read_parquet", expressions=[exp.Literal.string(str(glob))]))


def range_table(lo: int, hi: int, alias: str = "g", column: str = "i") -> exp.Table:
    """``range(lo, hi) AS g(i)``."""
    fn = exp.Anonymous(this="range", expressions=[exp.Literal.number(int(lo)), exp.Literal.number(int(hi))])
    return exp.Table(this=fn, alias=exp.TableAlias(this=exp.to_identifier(alias), columns=[exp.to_identifier(column, quoted=True)]))


# --- generator parameters ---------------------------------------------------------------------


def draw_params(shape: str, features: int, classes: int, seed: int, skew: tuple[float, float] = (1.0, 3.0)) -> dict:
    """Per-class distribution parameters, drawn with numpy from ``seed``.

    Returns
    -------
    dict
        ``numeric``: list of (name, mu[K], sigma[K]); ``categorical``: list of
        (name, n_levels, p[K], s[K]), ``p`` drawn in ``skew``; ``text``: vocabulary size and
        per-class shifts.
    """
    rng = np.random.default_rng(seed)
    if shape == "text":
        return {"vocabulary": features, "shift": [k * (features // classes) for k in range(classes)]}
    n_cat = {"wide": 0, "mixed": features // 2, "categorical": features}[shape]
    n_num = features - n_cat
    numeric = [(f"x{j}", rng.normal(0.0, 1.0, classes).tolist(), np.exp(rng.uniform(-0.5, 0.5, classes)).tolist()) for j in range(n_num)]
    categorical = []
    for j in range(n_cat):
        n = int(rng.integers(3, 51))
        categorical.append((f"c{j}", n, rng.uniform(*skew, classes).tolist(), rng.integers(0, n, classes).astype(float).tolist()))
    return {"numeric": numeric, "categorical": categorical}


# --- queries ----------------------------------------------------------------------------------


def table_query(params: dict, classes: int, seed: int, lo: int, hi: int, weights: bool = False) -> exp.Select:
    """Rows ``lo .. hi-1`` of a wide / mixed / categorical table.

    An inner query computes the class index ``k`` and one hash ``h<j>`` per feature, so each
    hash is evaluated once per row. ``weights`` adds a DOUBLE column ``w`` uniform in (0.5, 1.5).
    """
    i, k = col("i"), col("k")
    columns = params["numeric"] + params["categorical"]
    hashes = [exp.alias_(hash_bits(i, seed, j + 1), f"h{j}", quoted=True) for j in range(len(columns))]
    inner = exp.select(i, exp.alias_(class_index(i, seed, classes), "k", quoted=True), *hashes).from_(range_table(lo, hi))
    outputs = [exp.alias_(class_label(k, classes), LABEL, quoted=True)]
    for j, (name, mu, sigma) in enumerate(params["numeric"]):
        value = pick(mu, k) + pick(sigma, k) * gaussian(col(f"h{j}"))
        outputs.append(exp.alias_(value, name, quoted=True))
    for j, (name, n, p, s) in enumerate(params["categorical"], start=len(params["numeric"])):
        skewed = exp.func("floor", dbl(n) * exp.func("pow", uniform(col(f"h{j}")), pick(p, k)))
        level = exp.Mod(this=exp.paren(skewed + pick(s, k)), expression=dbl(n))
        outputs.append(exp.alias_(prefixed("v", level), name, quoted=True))
    if weights:
        outputs.append(exp.alias_(uniform(hash_bits(col("i"), seed, 10**6)) + dbl(0.5), WEIGHT, quoted=True))
    return exp.select(*outputs).from_(inner.subquery("r"))


def docs_query(classes: int, seed: int, lo: int, hi: int) -> exp.Select:
    """Documents ``lo .. hi-1``: (doc_id, label)."""
    i = col("i")
    return exp.select(exp.alias_(i, "doc_id", quoted=True), exp.alias_(class_label(class_index(i, seed, classes), classes), LABEL, quoted=True)).from_(range_table(lo, hi))


def tokens_query(params: dict, classes: int, seed: int, lo: int, hi: int) -> exp.Select:
    """Token rows of documents ``lo .. hi-1``: (doc_id, token, n), one row per distinct token.

    Nested steps: documents with ``k`` and one row per draw ``t``; one hash per draw; Zipf rank
    and topic flag; term id; ``GROUP BY doc_id, token`` with ``count(*)``.
    """
    i, k, t, doc, h, rank = col("i"), col("k"), col("t"), col("doc_id"), col("h"), col("rank")
    vocab = params["vocabulary"]
    span = TEXT_DRAWS[1] - TEXT_DRAWS[0] + 1
    spread = exp.cast(exp.Mod(this=hash_bits(i, seed, 1), expression=exp.Literal.number(span)), exp.DataType.Type.BIGINT)
    n_draws = exp.Add(this=exp.Literal.number(TEXT_DRAWS[0]), expression=spread)
    draws = exp.select(
        exp.alias_(i, "doc_id", quoted=True),
        exp.alias_(class_index(i, seed, classes), "k", quoted=True),
        exp.alias_(exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[n_draws])]), "t", quoted=True),
    ).from_(range_table(lo, hi))
    hashed = exp.select(doc, k, exp.alias_(hash_bits(doc, seed, 2, t), "h", quoted=True)).from_(draws.subquery("d"))
    # Zipf(1) rank in 1..V by inverting the continuous CDF ln(r) / ln(V + 1); topic flag from the
    # low 10 bits, disjoint from the 52 bits used by uniform().
    ranked = exp.select(
        doc,
        k,
        exp.alias_(exp.func("least", exp.func("floor", exp.func("exp", uniform(h) * dbl(math.log(vocab + 1.0)))), dbl(vocab)), "rank", quoted=True),
        exp.alias_(to_double(exp.BitwiseAnd(this=h, expression=exp.Literal.number(1023))) < dbl(TEXT_TOPIC_SHARE * 1024.0), "topic", quoted=True),
    ).from_(hashed.subquery("hd"))
    shifted = exp.Mod(this=exp.paren(rank - dbl(1.0) + pick(params["shift"], k)), expression=dbl(vocab))
    term = exp.case().when(col("topic"), shifted).else_(rank - dbl(1.0))
    tokens = exp.select(doc, exp.alias_(prefixed("w", term), "token", quoted=True)).from_(ranked.subquery("rk"))
    return (
        exp.select(doc, col("token"), exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True))
        .from_(tokens.subquery("w"))
        .group_by(doc, col("token"))
        .order_by(doc)
    )


def copy_query(select: exp.Select, path: Path, dictionary_size_limit: int | None = None,
               row_group_size: int | None = None) -> str:
    """``COPY (select) TO 'path' (FORMAT parquet)`` rendered for DuckDB (the path is a quoted literal).

    ``dictionary_size_limit`` raises the number of distinct values DuckDB's writer keeps in a
    column dictionary before falling back to PLAIN encoding; ``row_group_size`` sets the rows
    of a row group (DuckDB's default: 122,880).
    """
    params = [exp.CopyParameter(this=exp.var("FORMAT"), expression=exp.var("parquet"))]
    if dictionary_size_limit:
        params.append(exp.CopyParameter(this=exp.var("DICTIONARY_SIZE_LIMIT"), expression=exp.Literal.number(int(dictionary_size_limit))))
    if row_group_size:
        params.append(exp.CopyParameter(this=exp.var("ROW_GROUP_SIZE"), expression=exp.Literal.number(int(row_group_size))))
    return exp.Copy(this=select.subquery(), kind=False, files=[exp.Literal.string(str(path))], params=params).sql("duckdb")


# --- driver -----------------------------------------------------------------------------------


def _split(rows: int, files: int) -> list[tuple[int, int]]:
    """Contiguous [lo, hi) row ranges, one per file."""
    edges = np.linspace(0, rows, files + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.parquet"))


def _write(con, make_query, out: Path, ranges, dictionary_size_limit: int | None = None) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for f, (lo, hi) in enumerate(ranges):
        path = out / f"part-{f:05d}.parquet"
        con.execute(copy_query(make_query(lo, hi), path, dictionary_size_limit))
        names.append(path.name)
    return names


def generate(shape: str, rows: int, features: int, classes: int, out, seed: int = 0, files: int = 1, weights: bool = False, con=None,
             skew: tuple[float, float] = (1.0, 3.0)) -> dict:
    """Write one synthetic data set as Parquet and return its metadata.

    Parameters
    ----------
    shape : {'wide', 'mixed', 'categorical', 'text'}
    rows : int
        Rows (documents for ``text``).
    features : int
        Feature columns (vocabulary size for ``text``).
    classes : int
        Number of classes K (labels ``'c0'`` ...).
    out : path-like
        Output directory (created; existing ``part-*.parquet`` files are overwritten).
    seed : int
        Seed for both the generator parameters and the hash streams.
    files : int
        Number of Parquet files per table.
    weights : bool
        Add a sample-weight column ``w`` (DOUBLE, uniform in (0.5, 1.5)); not for ``text``.
    skew : (float, float)
        The range of the categorical levels' exponents ``p_cj`` (module docstring).
    con : duckdb.DuckDBPyConnection, optional
        Connection to use; a private in-memory one by default.

    Returns
    -------
    dict
        The content of ``OUT/meta.json``: arguments, ``label``, ``numeric`` and ``categorical``
        column names, ``globs`` (absolute, per table), ``rows`` per table, ``bytes`` and ``seconds``.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; expected one of {SHAPES}")
    if rows < 1 or features < 1 or classes < 2 or files < 1:
        raise ValueError("need rows >= 1, features >= 1, classes >= 2, files >= 1")
    if weights and shape == "text":
        raise ValueError("--weights is not supported for text")
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").unlink(missing_ok=True)
    if con is None:
        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
    params = draw_params(shape, features, classes, seed, tuple(skew))
    ranges = _split(rows, files)
    t0 = time.perf_counter()
    meta = {"shape": shape, "features": features, "classes": classes, "seed": seed, "files": files, "label": LABEL, "weight": WEIGHT if weights else None,
            "skew": list(skew)}
    if shape == "text":
        _write(con, lambda lo, hi: docs_query(classes, seed, lo, hi), out / "docs", ranges)
        # DuckDB's writer would store the token column PLAIN (too many distinct values for its
        # default dictionary limit); pyarrow and Spark dictionary-encode it (1 MiB dictionary
        # page). PLAIN makes scans ~4x and GROUP BY token ~3x slower, so match the common case.
        _write(con, lambda lo, hi: tokens_query(params, classes, seed, lo, hi), out / "tokens", ranges, features + 1)
        meta.update(numeric=[], categorical=[], globs={t: str(out / t / "*.parquet") for t in ("docs", "tokens")})
    else:
        _write(con, lambda lo, hi: table_query(params, classes, seed, lo, hi, weights), out, ranges)
        meta.update(
            numeric=[p[0] for p in params["numeric"]],
            categorical=[p[0] for p in params["categorical"]],
            levels={p[0]: p[1] for p in params["categorical"]},
            globs={"data": str(out / "*.parquet")},
        )
    meta["seconds"] = round(time.perf_counter() - t0, 3)
    count = exp.select(exp.Count(this=exp.Star()))
    meta["rows"] = {t: con.execute(count.from_(parquet_table(g)).sql("duckdb")).fetchone()[0] for t, g in meta["globs"].items()}
    meta["bytes"] = _dir_bytes(out)
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def load_or_generate(shape: str, rows: int, features: int, classes: int, out, regenerate: bool = False, **kwargs) -> dict:
    """``OUT/meta.json`` if it exists (a finished earlier run), else ``generate(...)``.

    The caller chooses ``out`` so that it encodes every argument (``run.py`` does).
    """
    meta = Path(out) / "meta.json"
    if meta.exists() and not regenerate:
        return json.loads(meta.read_text())
    return generate(shape, rows, features, classes, out, **kwargs)


def main(argv=None) -> int:
    """Command-line entry point; prints ``meta.json`` to stdout."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("Examples"):], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=SHAPES, required=True)
    ap.add_argument("--rows", type=int, required=True, help="rows (documents for text)")
    ap.add_argument("--features", type=int, required=True, help="feature columns (vocabulary size for text)")
    ap.add_argument("--classes", type=int, required=True)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--files", type=int, default=1, help="Parquet files per table")
    ap.add_argument("--weights", action="store_true", help="add a sample-weight column w (not for text)")
    ap.add_argument("--skew", type=float, nargs=2, default=(1.0, 3.0), metavar=("LO", "HI"),
                    help="range of the categorical levels' exponents (default 1 3; 6 12: a Zipf-like head)")
    a = ap.parse_args(argv)
    try:
        meta = generate(a.shape, a.rows, a.features, a.classes, a.out, seed=a.seed, files=a.files, weights=a.weights, skew=tuple(a.skew))
    except (ValueError, duckdb.Error) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
