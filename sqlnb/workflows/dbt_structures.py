"""Tree-augmented and k-dependence naive Bayes under dbt: the pair (and triple) counts as
incremental dbt models, the conditional tables derived from them in SQL, the structure
terms of the trained scoring macro, and the test that the counts still choose the structure.

The structure (each child's parents, :meth:`NaiveBayes.tree
<sqlnb.models.naive_bayes.model.NaiveBayes.tree>`: TAN's tree, KDB(1)'s or KDB(2)'s
parents) and a binned column's cut points are the generating model's, written into the
package; only the counts are retrained:

``<name>_pairs``
    per class and pair ``(a, b)`` of tree features (``a`` before ``b`` in the model's
    order; :func:`sqlnb.models.naive_bayes.tan.eligible`) and their values ``u``, ``v``:
    ``n``, the rows where both are present (:mod:`sqlnb.models.naive_bayes.tan`'s pair
    counts). Every pair is counted, not only the structure's, so that ``sqlnb
    dbt-import`` reads back the statistics ``sqlnb fit`` keeps (and derives its structure
    from them) and the structure test can compare every pair. A value is kept as text
    (``CAST(… AS VARCHAR)`` in the engine's dialect): the category, a binned column's bin
    number, a Bernoulli column's ``0`` / ``1`` (absent / present); the key ``(class, a, b,
    u, v)`` merges a batch's counts into the stored ones by adding them, as every count table.
``<name>_triples`` (KDB(2))
    per class and (child, parent, parent) triple of the generated structure (``a``, ``b``,
    ``d`` in the model's order) and their values ``u``, ``v``, ``w``: ``n``, the rows where
    all three are present (:class:`sqlnb.models.naive_bayes.kdb.JointCounts`).
``<name>_tree_<j>`` (child ``j``), and ``<name>_tree_<j>_<i>`` (its parent ``i`` alone, KDB(2))
    per parent values ``p0`` (``p1``) and child value ``cv`` (every combination of the
    values the columns' own counts hold, a binned column's every bin, a Bernoulli column's
    0 and 1), ``c<k>`` = ln p(cv | class k, parents) smoothed as
    :func:`sqlnb.models.naive_bayes.tan._conditional` does: a categorical or binned child
    ``(n(c, p, cv) + α) / (n(c, p) + α·n_j)``, a Bernoulli child ``(n(c, p, 1) + β₁) /
    (n(c, p) + β₁ + β₀)``; NULL where the denominator is 0 (no rows, no pseudo-count),
    whose term is the naive one.

The scoring macro joins each conditional table on the row's (parents, child) values as
text: the term is the cell of the first table that has a row (every parent present and
seen; else, KDB(2), the parent that is), else the child's naive term (0 for a missing or
unseen child), as :mod:`~sqlnb.models.naive_bayes.tan` and
:mod:`~sqlnb.models.naive_bayes.kdb` score.

The test ``sqlnb_<name>_structure`` (:func:`structure_test_sql`) recomputes I(X_a; X_b |
C) of every pair from ``<name>_pairs`` in SQL and fails, naming the feature, when a pair
now carries more than the generated structure allows (:func:`structure_checks`). It does
not test KDB's ranking by I(X; C); a binned column's cut points have a test of their own
(:mod:`sqlnb.workflows.dbt_cuts`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.models.naive_bayes.families import REGISTRY
from sqlnb.models.naive_bayes import kdb, tan
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.models.naive_bayes.tan import BERNOULLI_VALUES, _pairs
from sqlnb.source import Source
from sqlnb.stats import sorted_values
from sqlnb.workflows.dbt import _ln_ratio, _ref

#: The structures whose counts the training models count (AODE's: :mod:`sqlnb.workflows.dbt_aode`).
STRUCTURES = ("tan", "kdb:1", "kdb:2", "aode")
#: The keys of ``<name>_pairs`` and ``<name>_triples``.
PAIR_KEYS = ("class", "a", "b", "u", "v")
TRIPLE_KEYS = ("class", "a", "b", "d", "u", "v", "w")
_TEXT = exp.DataType.build("varchar")
#: Most grouping sets in one scan of DuckDB's pair counts, as :func:`tan.sets_per_scan
#: <sqlnb.models.naive_bayes.tan.sets_per_scan>` chooses them on two threads (each set
#: keeps a hash table per thread): 12, so 8 tree features' 28 pairs take 3 scans.
PAIR_SETS = int(tan.PAIR_SCAN_BYTES // (2 * tan.GROUPING_SET_BYTES))
_c = sql.col


def paired(model: NaiveBayes) -> list:
    """The tree features (their pair counts are counted), in the model's order; [] for
    a model without a structure."""
    if model.hyper.structure not in STRUCTURES or model.stats.pairs is None:
        return []
    by_name = {f.name: f for f in model.features}
    return [by_name[n] for n in model.stats.pairs.features]


def code(f, scoring: bool = False) -> exp.Expression:
    """The value a tree feature's pairs are counted and looked up by, as text over
    ``src``: the category, the bin number, Bernoulli 0 / 1; NULL when missing."""
    if f.kind == "binned":
        x = REGISTRY["binned"].bin_index(f, scoring=scoring)
    elif f.kind == "bernoulli":
        v = REGISTRY["bernoulli"].value(f, scoring=scoring)
        x = exp.Case(ifs=[exp.If(this=exp.Is(this=v, expression=exp.Null()), true=exp.Null()),
                          exp.If(this=exp.GT(this=v.copy(), expression=sql.dbl(f.threshold)),
                                 true=exp.Literal.number(1))], default=exp.Literal.number(0))
    else:
        x = sql.col(f.name, "src")
    return exp.Cast(this=x, to=_TEXT.copy())


def pairs_batch(model: NaiveBayes, features: list, head: list, mark: list, src: exp.Table,
                dialect: str) -> exp.Select:
    """The pair counts of the rows in ``new`` (aliased ``src``): on DuckDB in one scan
    (:func:`_grouping_sets`), elsewhere one UNION ALL branch per pair.

    PostgreSQL plans the GROUPING SETS of binned columns (a CASE each) as sorts, each
    computing the bins again: 1M rows of 4 binned and 4 categorical columns (28 pairs),
    40 s against 20 s for the 28 GROUP BYs over the materialized CTE ``new`` (28 s
    against 20 s with work_mem 64 MB, JIT off); DuckDB's one scan took 2.4 s against 5.0
    s (benchmarks/README.md). On Spark the tested form is kept."""
    if dialect == "duckdb":
        return _grouping_sets(model, features, mark, dialect)
    label = sql.col(model.label, "src")
    out = []
    for i, fa in enumerate(features):
        for fb in features[i + 1:]:
            u, v = code(fa), code(fb)
            q = (exp.select(*[c.copy() for c in head], exp.alias_(exp.Literal.string(fa.name), "a", quoted=True),
                            exp.alias_(exp.Literal.string(fb.name), "b", quoted=True),
                            exp.alias_(u, "u", quoted=True), exp.alias_(v, "v", quoted=True),
                            exp.alias_(exp.Cast(this=exp.Count(this=exp.Star()), to=exp.DataType.build("double")),
                                       "n", quoted=True), *[m.copy() for m in mark])
                 .from_(src.copy())
                 .where(exp.and_(exp.Not(this=exp.Is(this=u.copy(), expression=exp.Null())),
                                 exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null()))))
                 .group_by(label.copy(), u.copy(), v.copy()))
            out.append(q)
    return sql.union_all(out)


def _grouping_sets(model: NaiveBayes, features: list, mark: list, dialect: str) -> exp.Select:
    """The pair counts of the rows in ``new`` in one scan per :data:`PAIR_SETS` pairs:
    sqlnb's own pair scan (:func:`tan.pairs_query
    <sqlnb.models.naive_bayes.tan.pairs_query>`, ``GROUP BY GROUPING SETS ((class, x_a,
    x_b), …)``) cut as :func:`tan.pair_statements
    <sqlnb.models.naive_bayes.tan.pair_statements>` cuts it, the parts joined by UNION
    ALL, each unpivoted to the rows ``(class, a, b, u, v, n)`` by a
    CROSS JOIN with its list of pairs: a grouped row belongs to the pair whose two features
    it is grouped by (``GROUPING(x) = 0``), and counts when both values are present."""
    feats = list(features)
    new = Source(expr=sql.table("new"), columns={}, description="the new rows")
    out = []
    for chunk in tan.pair_statements(len(feats), PAIR_SETS, dialect):
        used = sorted({j for pair in chunk for j in pair})
        at = {j: i for i, j in enumerate(used)}
        grouped = tan.pairs_query(new, model.label, None, [feats[j] for j in used],
                                  pairs=[(at[a], at[b]) for a, b in chunk])
        which = exp.values([(exp.Literal.string(feats[a].name), exp.Literal.string(feats[b].name),
                             exp.Literal.number(at[a]), exp.Literal.number(at[b])) for a, b in chunk],
                           alias="p", columns=["a", "b", "i", "j"])

        def pick(side: str, prefix: str, text: bool = False) -> exp.Expression:
            def one(i: int, j: int) -> exp.Expression:
                return _text(feats[j], _c(f"{prefix}{i}", "g")) if text else _c(f"{prefix}{i}", "g")

            return exp.Case(ifs=[exp.If(this=_c(side, "p").eq(exp.Literal.number(i)), true=one(i, j))
                                 for i, j in enumerate(used)])

        zero = exp.Literal.number(0)
        q = (exp.select(exp.alias_(_c("k", "g"), "class", quoted=True), exp.alias_(_c("a", "p"), "a", quoted=True),
                        exp.alias_(_c("b", "p"), "b", quoted=True), exp.alias_(pick("i", "v", True), "u", quoted=True),
                        exp.alias_(pick("j", "v", True), "v", quoted=True),
                        exp.alias_(exp.Cast(this=_c("n", "g"), to=exp.DataType.build("double")), "n", quoted=True),
                        *[m.copy() for m in mark])
             .from_(exp.Subquery(this=grouped, alias=exp.TableAlias(this=sql.ident("g"))))
             .join(which, join_type="cross")
             .where(exp.and_(pick("i", "g").eq(zero), pick("j", "g").eq(zero.copy()),
                             exp.Not(this=exp.Is(this=pick("i", "v", True), expression=exp.Null())),
                             exp.Not(this=exp.Is(this=pick("j", "v", True), expression=exp.Null())))))
        out.append(q)
    return sql.union_all(out)


def _text(f, x: exp.Expression) -> exp.Expression:
    """A value of the pair scan (:func:`tan._fit_value`) as :func:`code` writes it: Bernoulli
    presence as ``1`` / ``0`` (NULL stays NULL), every other value cast to text."""
    if f.kind == "bernoulli":
        return exp.Case(ifs=[exp.If(this=x, true=exp.Literal.string("1")),
                             exp.If(this=exp.Not(this=x.copy()), true=exp.Literal.string("0"))])
    return exp.Cast(this=x, to=_TEXT.copy())


def triples_batch(model: NaiveBayes, head: list, mark: list, src: exp.Table) -> exp.Select:
    """KDB(2)'s joint counts of each (child, parent, parent) triple of the generated
    structure over the rows in ``new`` (aliased ``src``) where all three are present."""
    label = sql.col(model.label, "src")
    by_name = {f.name: f for f in model.features}
    out = []
    for names in triples(model):
        xs = [code(by_name[n]) for n in names]
        q = (exp.select(*[c.copy() for c in head],
                        *[exp.alias_(exp.Literal.string(n), key, quoted=True) for n, key in zip(names, "abd")],
                        *[exp.alias_(x, key, quoted=True) for x, key in zip(xs, "uvw")],
                        exp.alias_(exp.Cast(this=exp.Count(this=exp.Star()), to=exp.DataType.build("double")),
                                   "n", quoted=True), *[m.copy() for m in mark])
             .from_(src.copy())
             .where(exp.and_(*[exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())) for x in xs]))
             .group_by(label.copy(), *[x.copy() for x in xs]))
        out.append(q)
    return sql.union_all(out)


# -- the conditional tables -------------------------------------------------------------------------

def _domain(model: NaiveBayes, name: str, f) -> exp.Select:
    """``SELECT … AS x``: a tree feature's values as text (its counts table's values, every
    bin, or 0 and 1)."""
    if f.kind == "categorical":
        j = model.features.index(f)
        return (exp.select(exp.alias_(exp.Cast(this=_c("value"), to=_TEXT.copy()), "x", quoted=True))
                .from_(_ref(f"{name}_counts_{j}")).group_by(_c("value")))
    n = len(f.edges) + 1 if f.kind == "binned" else len(BERNOULLI_VALUES)
    out = []
    for i in range(n):
        q = exp.select(exp.alias_(exp.Literal.string(str(i)), "x", quoted=True))
        out.append(q)
    return sql.union_all(out)


def tree_sql(model: NaiveBayes, name: str, child, parents: tuple, dialect: str) -> str:
    """A conditional table (:func:`conditional`) rendered for ``dialect``."""
    return sql.render(conditional(model, name, child, parents), dialect, pretty=True)


def conditional(model: NaiveBayes, name: str, child, parents: tuple) -> exp.Select:
    """A conditional table: ln p(child value | class, parent values) for every combination
    of values (``p0`` (``p1``), ``cv``, ``c<k>``), from the pair counts (one parent) or the
    triple counts (two)."""
    rank = {f.name: i for i, f in enumerate(paired(model))}
    names = sorted([child.name, *(p.name for p in parents)], key=rank.get)  # as the counts key them
    table, cols = ("pairs", PAIR_KEYS[3:]) if len(parents) == 1 else ("triples", TRIPLE_KEYS[4:])
    at = {n: cols[i] for i, n in enumerate(names)}
    keys = [f"p{i}" for i in range(len(parents))] + ["cv"]
    feats = [*parents, child]
    K = len(model.classes)
    per = [exp.alias_(exp.Sum(this=exp.Case(ifs=[exp.If(this=_c("class").eq(sql.value(c, model.label_type)),
                                                        true=_c("n"))], default=sql.dbl(0.0))), f"k{k}", quoted=True)
           for k, c in enumerate(model.classes)]
    heads = ("a", "b") if len(parents) == 1 else TRIPLE_KEYS[1:4]
    cnt = (exp.select(*[exp.alias_(_c(at[f.name]), key, quoted=True) for f, key in zip(feats, keys)], *per)
           .from_(_ref(f"{name}_{table}"))
           .where(exp.and_(*[_c(h).eq(exp.Literal.string(n)) for h, n in zip(heads, names)]))
           .group_by(*[_c(at[f.name]) for f in feats]))
    grid = exp.select(*[exp.alias_(_c("x", f"d{i}"), key, quoted=True) for i, key in enumerate(keys)],
                      *[exp.alias_(exp.Coalesce(this=_c(f"k{k}", "n"), expressions=[sql.dbl(0.0)]), f"k{k}",
                                   quoted=True) for k in range(K)])
    grid = grid.from_(exp.Subquery(this=_domain(model, name, feats[0]), alias=exp.TableAlias(this=sql.ident("d0"))))
    for i, f in enumerate(feats[1:], 1):
        grid = grid.join(exp.Subquery(this=_domain(model, name, f), alias=exp.TableAlias(this=sql.ident(f"d{i}"))),
                         join_type="cross")
    grid = grid.join(exp.Table(this=sql.ident("cnt"), alias=exp.TableAlias(this=sql.ident("n"))),
                     on=exp.and_(*[_c(key, "n").eq(_c("x", f"d{i}")) for i, key in enumerate(keys)]), join_type="left")
    pkeys = keys[:-1]
    tot = (exp.select(*[_c(key) for key in pkeys],
                      *[exp.alias_(exp.Sum(this=_c(f"k{k}")), f"t{k}", quoted=True) for k in range(K)],
                      exp.alias_(exp.Cast(this=exp.Count(this=exp.Star()), to=exp.DataType.build("double")), "nj",
                                 quoted=True))
           .from_(sql.table("grid")).group_by(*[_c(key) for key in pkeys]))
    hp = model.hyper
    out = [_c(key, "g") for key in keys]
    for k in range(K):
        n, t = _c(f"k{k}", "g"), _c(f"t{k}", "t")
        if child.kind == "bernoulli":
            b1, b0 = hp.beta_for(child.name)
            pseudo = exp.Case(ifs=[exp.If(this=_c("cv", "g").eq(exp.Literal.string("1")), true=sql.dbl(float(b1)))],
                              default=sql.dbl(float(b0)))
            den = exp.Add(this=t, expression=sql.dbl(float(b1 + b0)))
        else:
            alpha = hp.pseudo(hp.alpha_for(child.name))
            pseudo = sql.dbl(float(alpha))
            den = exp.Add(this=t, expression=exp.Mul(this=sql.dbl(float(alpha)), expression=_c("nj", "t")))
        value = exp.Case(ifs=[exp.If(this=exp.NEQ(this=den.copy(), expression=sql.dbl(0.0)),
                                     true=_ln_ratio(exp.Add(this=n, expression=pseudo), den))])
        out.append(exp.alias_(exp.Cast(this=value, to=exp.DataType.build("double")), f"c{k}", quoted=True))
    tree = (exp.select(*out).from_(exp.Table(this=sql.ident("grid"), alias=exp.TableAlias(this=sql.ident("g"))))
            .join(exp.Table(this=sql.ident("tot"), alias=exp.TableAlias(this=sql.ident("t"))),
                  on=exp.and_(*[_c(key, "t").eq(_c(key, "g")) for key in pkeys]), join_type="inner")
            .with_(sql.ident("cnt"), as_=cnt).with_(sql.ident("grid"), as_=grid).with_(sql.ident("tot"), as_=tot))
    return tree


def children(model: NaiveBayes) -> list[tuple[int, Any, tuple]]:
    """(position, child, its parents) of every feature with parents, in the model's order."""
    if not paired(model):
        return []
    by_name = {f.name: f for f in model.features}
    out = []
    for j, f in enumerate(model.features):
        ps = model.tree().get(f.name)
        if ps:
            out.append((j, f, tuple(by_name[p] for p in ((ps,) if isinstance(ps, str) else ps))))
    return out


def triples(model: NaiveBayes) -> list[tuple[str, ...]]:
    """The (child, parent, parent) triples whose joint counts are counted (KDB(2)), as
    names in the model's order of tree features."""
    rank = {f.name: i for i, f in enumerate(paired(model))}
    return [tuple(sorted((c.name, *(p.name for p in ps)), key=rank.get)) for _, c, ps in children(model)
            if len(ps) == 2]


def _tables(model: NaiveBayes, name: str) -> list[tuple[str, int, Any, tuple]]:
    """(table, child position, child, parents) of every conditional table, in the order a
    term reads them: the child's own (every parent), then each parent's alone (a two-parent
    child's term when the other parent is missing)."""
    out = []
    for j, child, ps in children(model):
        out.append((f"{name}_tree_{j}", j, child, ps))
        if len(ps) == 2:
            out += [(f"{name}_tree_{j}_{i}", j, child, (p,)) for i, p in enumerate(ps)]
    return out


def tables(model: NaiveBayes, name: str) -> list[tuple[str, Any]]:
    """(table, its SELECT per dialect) of each conditional table."""
    return [(table, lambda d, c=child, ps=ps: tree_sql(model, name, c, ps, d))
            for table, _, child, ps in _tables(model, name)]


def joins(model: NaiveBayes, name: str) -> list[exp.Join]:
    """The scoring SELECT's LEFT JOIN of each conditional table on the row's values."""
    out = []
    for table, _, child, ps in _tables(model, name):
        on = [code(p, scoring=True).eq(_c(f"p{i}", table)) for i, p in enumerate(ps)]
        on.append(code(child, scoring=True).eq(_c("cv", table)))
        out.append(exp.Join(this=_ref(table, table), side="LEFT", on=exp.and_(*on)))
    return out


def term(model: NaiveBayes, name: str, j: int, k: int, naive: exp.Expression) -> exp.Expression:
    """Feature ``j``'s term in class ``k``: the cell of the first of its conditional tables
    with a row for the row's values (every parent present and seen, else one), or, without
    one or where that cell is NULL (an empty parent value), its naive term ``naive``;
    ``naive`` itself when ``j`` has no parent."""
    mine = [table for table, at, _, _ in _tables(model, name) if at == j]
    if not mine:
        return naive
    return exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=_c("cv", t), expression=exp.Null())),
                                true=exp.Coalesce(this=_c(f"c{k}", t), expressions=[naive.copy()])) for t in mine],
                    default=naive)


# -- reading the counts back ---------------------------------------------------------------------------

def import_pairs(model: NaiveBayes, read, classes: list, counts: dict):
    """The pair counts (and KDB(2)'s triple counts) of the tree features from the rows of
    ``<name>_pairs`` and ``<name>_triples`` (``read(part, columns)``), each text value
    mapped back to the value it is (``counts``: per categorical feature, text -> value as
    the engine casts them)."""
    feats = paired(model)
    by_name = {f.name: f for f in feats}
    pos = {c: i for i, c in enumerate(classes)}

    def typed(n, text):
        f = by_name[n]
        if f.kind == "categorical":
            return counts[f.name][text]
        return int(text) if f.kind == "binned" else BERNOULLI_VALUES[int(text)]

    def cells(part: str, keys: tuple) -> dict:
        width = (len(keys) - 1) // 2
        out: dict = {}
        for row in read(part, list(keys) + ["n"]):
            if row[0] in pos:
                names, texts = row[1:1 + width], row[1 + width:1 + 2 * width]
                key = (pos[row[0]], *(typed(n, t) for n, t in zip(names, texts)))
                cell = out.setdefault(tuple(names), {})
                cell[key] = cell.get(key, 0.0) + float(row[-1])
        return out

    pairs = _pairs(feats, len(classes), cells("pairs", PAIR_KEYS))
    if not triples(model):
        return pairs
    found = cells("triples", TRIPLE_KEYS)
    joints = {}
    for t in triples(model):
        cell = found.get(t, {})
        values = [sorted_values(key[1 + i] for key in cell) for i in range(3)]
        at = [{v: i for i, v in enumerate(vs)} for vs in values]
        arr = np.zeros((len(classes), *(len(v) for v in values)))
        for key, n in cell.items():
            arr[(key[0], *(at[i][v] for i, v in enumerate(key[1:])))] = n
        joints[t] = kdb.JointCounts(t, values, arr)
    return kdb.KdbPairs(list(pairs.features), dict(pairs.cells), joints)


# -- the structure test ---------------------------------------------------------------------------------

#: How much more conditional mutual information (nats) a pair must carry than the generated
#: choice before the structure test fails: ties (and the rounding of a sum of logarithms
#: in another order) keep the structure.
TOLERANCE = 1e-9


def structure_checks(model: NaiveBayes) -> list[tuple[str, str, str, str, str]]:
    """(the feature named, the pair that must not carry more information, the pair it is
    compared with): every inequality of I(X_a; X_b | C) that the generated structure needs.

    TAN: a spanning tree is a maximum one if and only if no pair outside it carries more
    than any tree edge on the tree's path between the two (the cycle property), so each
    pair outside the tree is compared with each edge on its path. KDB: each feature's
    parents carry at least as much as every other feature ranked before it (the ranking by
    I(X; C) is the generated one, not tested again)."""
    if not children(model):  # naive Bayes, AODE: no structure to keep
        return []
    parents = {c.name: [p.name for p in ps] for _, c, ps in children(model)}
    rank = {f.name: i for i, f in enumerate(paired(model))}

    def pair(a: str, b: str) -> tuple[str, str]:
        return (a, b) if rank[a] < rank[b] else (b, a)

    out = []
    if model.hyper.structure == "tan":
        links: dict = {n: set() for n in rank}
        for c, ps in parents.items():
            links[c].add(ps[0])
            links[ps[0]].add(c)

        def path(a: str, b: str, seen=()) -> list | None:  # the tree edges from a to b
            if a == b:
                return []
            for n in sorted(links[a] - set(seen)):
                rest = path(n, b, (*seen, a))
                if rest is not None:
                    return [pair(a, n), *rest]
            return None

        names = list(rank)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if b in parents.get(a, ()) or a in parents.get(b, ()):
                    continue
                for edge in path(a, b) or []:
                    child = edge[1] if parents.get(edge[1], [None])[0] == edge[0] else edge[0]
                    out.append((child, *pair(a, b), *edge))
        return out
    order = kdb.structure(model.features, model.stats, kdb.order_of(model.hyper.structure))[1]
    for i, c in enumerate(order):
        for q in order[:i]:
            if q not in parents.get(c, []):
                out += [(c, *pair(c, q), *pair(c, p)) for p in parents.get(c, [])]
    return out


def structure_test_sql(model: NaiveBayes, name: str, dialect: str) -> str | None:
    """The rows of a failing structure test: per inequality of :func:`structure_checks` the
    stored pair counts now break by more than :data:`TOLERANCE`, the feature and what to do.

    I(X_a; X_b | C) is computed from ``<name>_pairs`` as sqlnb computes it (the plug-in
    estimate over the pair's own table: ``Σ n/N · ln(n · n(c) / (n(c, u) · n(c, v)))``,
    :func:`sqlnb.models.naive_bayes.information.conditional_mutual_information`)."""
    checks = structure_checks(model)
    if not checks:
        return None
    pairs = _ref(f"{name}_pairs")

    def sums(*keys: str) -> exp.Select:
        return (exp.select(*[_c(k) for k in ("a", "b", *keys)], exp.alias_(exp.Sum(this=_c("n")), "s", quoted=True))
                .from_(pairs.copy()).group_by(*[_c(k) for k in ("a", "b", *keys)]))

    def on(alias: str, *keys: str) -> exp.Expression:
        return exp.and_(*[_c(k, alias).eq(_c(k, "p")) for k in ("a", "b", *keys)])

    ratio = exp.Div(this=exp.Mul(this=_c("n", "p"), expression=_c("s", "c")),
                    expression=sql.paren(exp.Mul(this=_c("s", "cu"), expression=_c("s", "cv"))))
    term = exp.Mul(this=exp.Div(this=_c("n", "p"), expression=_c("s", "t")), expression=exp.Ln(this=ratio))
    cmi = (exp.select(_c("a", "p"), _c("b", "p"), exp.alias_(exp.Sum(this=term), "cmi", quoted=True))
           .from_(exp.Table(this=pairs.this.copy(), alias=exp.TableAlias(this=sql.ident("p"))))
           .join(exp.Subquery(this=sums(), alias=exp.TableAlias(this=sql.ident("t"))), on=on("t"), join_type="inner")
           .join(exp.Subquery(this=sums("class"), alias=exp.TableAlias(this=sql.ident("c"))), on=on("c", "class"),
                 join_type="inner")
           .join(exp.Subquery(this=sums("class", "u"), alias=exp.TableAlias(this=sql.ident("cu"))),
                 on=on("cu", "class", "u"), join_type="inner")
           .join(exp.Subquery(this=sums("class", "v"), alias=exp.TableAlias(this=sql.ident("cv"))),
                 on=on("cv", "class", "v"), join_type="inner")
           .where(exp.GT(this=_c("n", "p"), expression=sql.dbl(0.0)))
           .group_by(_c("a", "p"), _c("b", "p")))
    rows = [tuple(exp.Literal.string(v) for v in (f"feature {c}: the pair ({a}, {b}) now carries more information "
                                                  f"given the class than the generated ({ea}, {eb}), so a fit would "
                                                  "choose another structure; fit again and generate the package "
                                                  "again", a, b, ea, eb))
            for c, a, b, ea, eb in checks]
    want = exp.values(rows, alias="want", columns=["problem", "a", "b", "ea", "eb"])

    def info(alias: str, a: str, b: str) -> exp.Join:
        return exp.Join(this=exp.Table(this=sql.ident("cmi"), alias=exp.TableAlias(this=sql.ident(alias))),
                        side="LEFT", on=exp.and_(_c("a", alias).eq(_c(a, "want")), _c("b", alias).eq(_c(b, "want"))))

    def zero(alias: str) -> exp.Expression:
        return exp.Coalesce(this=_c("cmi", alias), expressions=[sql.dbl(0.0)])

    query = (exp.select(_c("problem", "want")).from_(want)
             .join(info("x", "a", "b")).join(info("e", "ea", "eb"))
             .where(exp.GT(this=zero("x"), expression=exp.Add(this=zero("e"), expression=sql.dbl(TOLERANCE))))
             .with_(sql.ident("cmi"), as_=cmi))
    return sql.render(query, dialect, pretty=True)
