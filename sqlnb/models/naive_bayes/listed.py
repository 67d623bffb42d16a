"""DuckDB's scoring of the structures over discrete features (TAN, KDB, and averages of
structures such as ``tan+kdb:2+aode``) from prelude columns: each discrete feature's value
position computed once per row, and every table the SELECT reads held in one list per
class, written once.

Prelude (:func:`prelude`, columns of the SELECTs around the source)::

    sqlnb_position<a>   COALESCE(q_a, n_a)      the a-th discrete feature's 0-based value
                                                position q_a (:func:`tan._position`); n_a,
                                                its missing slot, when NULL, NaN or unseen
    sqlnb_tables<c>     [cells…]                class c's cells of every table below, one
                                                list (:func:`sqlnb.sql.bound_list`)
    sqlnb_reads<m>      [start + index + 1, …]  over the positions, the places of the cells
                                                summed into one term (:meth:`Plan.reads`)
    sqlnb_trie          [node…]                 a deep KDB's (:mod:`.skdb`) tries of seen
                                                configurations and their constants, one list
    sqlnb_nodes<j>      list_transform(…)       every deep child's node at depth j, and
    sqlnb_places        list_transform(…)       its cell's place (:meth:`Plan.deep_columns`)

A cell's place is ``start + index + 1``, ``index`` the row-major position in a table
padded with a missing slot per axis (:func:`tan.padded_cells`) and ``start`` the table's
first cell in the list. The cells read are:

* a tree child's (TAN, KDB): its padded table, parents first (a missing child reads 0,
  missing parents the table of the parents present: :func:`tan.padded_read`'s cells);
* a discrete feature's that is no child (a root, or any under an average): its naive
  Bayes row ln p(x | c) and 0 in the missing slot;
* a deep KDB child's: the back-off table of every configuration seen in training (the
  trie's nodes), read at the deepest node its present parents reach;
* under an average, a tree member's, whose sum is its log-ratio D_{s,c}
  (:mod:`.mixture`): per child its padded table minus its padded naive row, cell by cell
  (the same doubles as ``Σ (t − n)`` of the portable form).

Each term is then ``list_sum(list_select(sqlnb_tables<c>, sqlnb_reads<m>))``: the
children and naive rows of a single tree one term per class (``explain``, which weighs
one term per feature, reads each cell: ``list_extract``), under an average the naive rows
one and each tree member's D one. The places are written once for all the classes and
members that read them, and each term has a fixed size.

An AODE member reads its own prelude (:func:`aode.prelude`, :func:`aode.padded_terms`),
whose slots then give every position (``slot − G − 1``, :func:`aode.slot_positions`), so
that no position is written twice.
So the SELECT grows as the number of features, and the tables, bound as parameters where
DuckDB scores in place (literals in an export), as their cells. On 6a739ab each TAN or
KDB term repeated its positions' expressions and held a literal of its own table, and an
average re-wrote every member's terms with one literal per AODE pair table (breast
cancer's 30 binned columns: 3.6 MB and 22 s for one row, ``benchmarks/structured_scoring.py``);
with a read per cell and class instead of the lists of places, the average took 0.41 s
(benchmarks/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.models.naive_bayes import aode, kdb, mixture, skdb, tan
from sqlnb.models.naive_bayes.families import Feature

POSITION_PREFIX = "sqlnb_position"
TABLE_PREFIX = "sqlnb_tables"
READS_PREFIX = "sqlnb_reads"
STEPS = "sqlnb_trie"
POSITIONS = "sqlnb_positions"
NODES_PREFIX = "sqlnb_nodes"
PLACES = "sqlnb_places"
#: A deep child's step past its last parent: beyond the trie list, so the node is NULL.
_BEYOND = 1 << 40


def _extract(items: exp.Expression, index: exp.Expression) -> exp.Expression:
    """``list_extract(items, index)`` (1-based; NULL past the end or for a NULL index)."""
    return exp.Anonymous(this="list_extract", expressions=[items, index])


@dataclass
class Plan:
    """Where every table sits in the per-class lists, for one derived model.

    ``names``: the discrete (paired) features in model order, ``sizes`` their numbers of
    values; ``cells`` the tables' cells (K, m) in list order; ``naive[name]`` the start
    of a feature's padded naive row; ``children[m][child]`` ``(start, axes)`` of member
    ``m``'s padded table of ``child`` (its difference to the naive row under an average),
    ``axes`` the features it is indexed by, child last. ``at``: the expressions the value
    positions are read from when an AODE member's prelude has them
    (:func:`aode.slot_positions`), default the prelude's own position columns.
    """

    names: list
    sizes: dict
    at: dict | None = None
    cells: list = field(default_factory=list)
    naive: dict = field(default_factory=dict)
    children: list = field(default_factory=list)
    width: int = 0
    #: deep KDB (:mod:`.skdb`): each child's ``(start, n_child, [(step start, base, n_pa, parent)…])``,
    #: and every child's trie steps in one integer list, followed by the constants of
    #: :meth:`deep_layout` at the offsets ``deep_at``
    deep: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)
    deep_at: list = field(default_factory=list)
    dropped: list = field(default_factory=list)  # skdb: the features past its s, no term
    lists: list = field(default_factory=list, init=False)  # :func:`prelude`'s packed lists, built once

    def add(self, table: np.ndarray) -> int:
        """Append a (K, …) table's cells; returns its 0-based start in the list."""
        flat = np.asarray(table, dtype=float).reshape(table.shape[0], -1)
        start = self.width
        self.cells.append(flat)
        self.width += flat.shape[1]
        return start

    def position(self, name: str) -> exp.Expression:
        return sql.col(f"{POSITION_PREFIX}{self.names.index(name)}") if self.at is None else self.at[name].copy()

    def deep_layout(self) -> None:
        """Append to the trie list (:attr:`steps`) the per-child constants :meth:`deep_columns`
        reads, child i (1-based, in :attr:`deep`'s order) at ``offset + i``: per depth j
        ``step_j + 1`` (:data:`_BEYOND` for a child of fewer parents: a place past the list,
        so its node is NULL), n_pa_j + 1, pa_j's 1-based place among the positions and the
        row base_j of depth j's nodes; then n_child + 1, the child's place among the
        positions and its table's start + 1."""
        children = list(self.deep.values())
        depth = max((len(steps) for _, _, steps in children), default=0)
        names = {name: a + 1 for a, name in enumerate(self.names)}
        names |= {key: names[key[1]] for key in self.deep if isinstance(key, tuple)}  # (member, child): eskdb

        def add(values) -> int:
            self.steps += [int(v) for v in values]
            return len(self.steps) - len(children)

        for j in range(depth):
            at = [steps[j] if j < len(steps) else None for _, _, steps in children]
            self.deep_at.append((add(_BEYOND if s is None else s[0] + 1 for s in at),
                                 add(0 if s is None else s[2] + 1 for s in at),
                                 add(1 if s is None else names[s[3]] for s in at),
                                 add(0 if s is None else s[1] for s in at)))
        self.deep_at.append((add(n_x + 1 for _, n_x, _ in children), add(names[c] for c in self.deep),
                             add(start + 1 for start, _, _ in children)))

    def deep_columns(self) -> list[tuple[str, exp.Expression]]:
        """A deep KDB's prelude columns (:func:`skdb.trie`): the positions as one list, then
        one list per depth j = 1 … L of every child's node, and one of every child's place
        in the tables, each a ``list_transform`` over the children i = 1 … n of a fixed
        size (the per-child constants :meth:`deep_layout` put in the trie list)::

            sqlnb_positions  [sqlnb_position0, …]
            sqlnb_nodes<j>   NULLIF(trie[step_j + 1 + l_{j−1} · (n_pa_j + 1) + position of pa_j], −1)
            sqlnb_places     start + 1 + position of the child
                             + (n_child + 1) · COALESCE(base_L + l_L, …, base_1 + l_1, 0)

        l_0 = 0 (the root); a node NULL where the configuration was not seen in training or
        a parent is missing (its last slot, −1), and NULL from there on, so the place is the
        row of the deepest node reached: the longest present, seen prefix (module docstring
        of :mod:`.skdb`). Each depth reads the one before by name, so it is a SELECT of its
        own around it (:func:`sqlnb.models.finish._layers`), and every class reads the
        places once (:func:`terms`). Before, each class's term repeated the walk, the node
        of depth j written j times over (kdb:4 on breast cancer's 30 binned columns: 598
        reads of the lists, 1.0 s for one row)."""
        i = sql.ident("sqlnb_child")
        n = len(self.deep)

        def at(offset: int) -> exp.Expression:  # the constant of child i at ``offset``
            return _extract(sql.col(STEPS), exp.Add(this=exp.Column(this=i.copy()),
                                                    expression=exp.Literal.number(offset)))

        def each(e: exp.Expression) -> exp.Expression:
            series = exp.Anonymous(this="generate_series", expressions=[exp.Literal.number(1),
                                                                         exp.Literal.number(n)])
            lam = exp.Lambda(this=e, expressions=[i.copy()])
            return exp.Anonymous(this="list_transform", expressions=[series, lam])

        def position(offset: int) -> exp.Expression:
            return _extract(sql.col(POSITIONS), at(offset))

        out = [(POSITIONS, exp.Array(expressions=[self.position(name) for name in self.names]))]
        rows = []
        for j, (step, mul, parent, base) in enumerate(self.deep_at[:-1], start=1):
            index = exp.Add(this=at(step), expression=position(parent))
            if j > 1:
                node = _extract(sql.col(f"{NODES_PREFIX}{j - 1}"), exp.Column(this=i.copy()))
                index = exp.Add(this=index, expression=exp.Mul(this=node, expression=at(mul)))
            out.append((f"{NODES_PREFIX}{j}", each(exp.Nullif(this=_extract(sql.col(STEPS), index),
                                                             expression=exp.Literal.number(-1)))))
            rows.insert(0, exp.Add(this=at(base), expression=_extract(sql.col(f"{NODES_PREFIX}{j}"),
                                                                    exp.Column(this=i.copy()))))
        width, child, start = self.deep_at[-1]
        row = exp.Coalesce(this=rows[0], expressions=[*rows[1:], exp.Literal.number(0)]) if rows else \
            exp.Literal.number(0)  # no child has a parent: every place is its root row
        place = exp.Add(this=exp.Add(this=at(start), expression=position(child)),
                        expression=exp.Mul(this=at(width), expression=row))
        return out + [(PLACES, each(place))]

    def place(self, child: str) -> exp.Expression:
        """A deep KDB child's place in the lists (:meth:`deep_columns`)."""
        return _extract(sql.col(PLACES), exp.Literal.number(list(self.deep).index(child) + 1))

    def index(self, start: int, axes: Sequence[str]) -> exp.Expression:
        """``start + 1 + row-major index of the axes' positions``: a cell's 1-based place in
        the per-class lists."""
        index: exp.Expression | None = None
        for name in axes:
            q = sql.col(f"{POSITION_PREFIX}{self.names.index(name)}") if self.at is None else self.at[name].copy()
            index = q if index is None else exp.Add(
                this=exp.Mul(this=sql.paren(index), expression=exp.Literal.number(self.sizes[name] + 1)), expression=q)
        return exp.Add(this=index, expression=exp.Literal.number(start + 1))

    def read(self, start: int, axes: Sequence[str], k: int) -> exp.Expression:
        """``list_extract(sqlnb_tables<k>, index)``: one cell (:meth:`index`)."""
        return exp.Anonymous(this="list_extract", expressions=[sql.col(f"{TABLE_PREFIX}{k}"), self.index(start, axes)])

    def reads(self, mix: mixture.Mixture | None) -> list[tuple[str, list[exp.Expression]]]:
        """The lists of cells :func:`terms` sums, by prelude column: ``sqlnb_reads0`` the
        cells that go straight into the class score (a single tree's children and the
        naive rows; a deep KDB's places go before them, :func:`prelude`), ``sqlnb_reads<m + 1>`` under an average
        tree member m's children (its D_{s,c}); empty lists left out."""
        direct = [self.index(start, (name,)) for name, start in self.naive.items()]
        if mix is None and self.children:
            direct = [self.index(start, axes) for start, axes in self.children[0].values()] + direct
        members = [] if mix is None else [[self.index(start, axes) for start, axes in mine.values()]
                                          for mine in self.children]
        return [(f"{READS_PREFIX}{m}", e) for m, e in enumerate([direct, *members]) if e]


def _naive_padded(row: np.ndarray) -> np.ndarray:
    """A naive Bayes row (K, n) with a 0 column for the missing slot."""
    return np.concatenate([row, np.zeros((row.shape[0], 1))], axis=1)


def _tables(net, child: str, naive: np.ndarray) -> tuple[tuple, dict]:
    """``(parents, {present parents: table})`` of a TAN or KDB child (:func:`tan.padded_read`)."""
    par = net.parent[child]
    ps = (par,) if isinstance(par, str) else tuple(par)
    tables = {ps: net.cpt[child], (): naive}
    if isinstance(net, kdb.Network) and len(ps) > 1:
        tables.update({(p,): net.fallback[child][p] for p in ps})
    return ps, tables


def plan(tree, mix: mixture.Mixture | None, structure: str, features: Sequence[Feature], stats,
         params: Mapping[str, Any]) -> Plan | None:
    """The :class:`Plan` of a single ``tree`` (TAN, KDB) of ``structure``, or of the
    average ``mix``; None for neither (naive Bayes, AODE). Over the discrete features (the
    pair counts'): each tree member's children's padded tables (under an average minus
    their naive rows, its D_{s,c}; AODE and naive members take no table here), then the
    naive row of every discrete feature with a naive term to read (categorical and binned
    ones: not a child of a single tree). An AODE member's prelude gives the positions
    (:func:`aode.slot_positions`)."""
    if tree is None and mix is None:
        return None
    nets, difference = (mix.nets, True) if mix is not None else ([(structure, tree)], False)
    names = stats.pairs.features
    by_name = {f.name: f for f in features}
    net = dict(nets).get("aode")
    out = Plan(list(names), {n: len(tan.feature_values(by_name[n], stats.features)) for n in names},
               None if net is None else aode.slot_positions(net))
    if isinstance(tree, skdb.Deep):  # deep KDB: each child's trie of seen configurations
        out.dropped = list(tree.dropped)
        for child, par in tree.parent.items():
            steps, cells, bases = skdb.trie(tree, child)
            ps = (par,) if isinstance(par, str) else tuple(par)
            found = []
            for j, (step, parent) in enumerate(zip(steps, ps)):
                found.append((len(out.steps), bases[j + 1], out.sizes[parent], parent))
                out.steps += step.tolist()
            out.deep[child] = (out.add(cells.reshape(cells.shape[0], -1)), cells.shape[2] - 1, found)
        if out.deep:
            out.deep_layout()
        nets = []
    for _, net in nets:
        mine = {}
        for child in (net.parent if isinstance(net, (tan.Tree, kdb.Network)) else {}):
            naive = tan.naive_row(by_name[child], params[child])
            ps, tables = _tables(net, child, naive)
            cells = tan.padded_cells(tables, ps)
            if difference:
                cells = cells - _naive_padded(naive).reshape(naive.shape[0], *([1] * len(ps)), -1)
            mine[child] = (out.add(cells), (*ps, child))
        out.children.append(mine)
    single = out.children[0] if not difference and out.children else dict(out.deep)
    for name in names:
        f = by_name[name]
        if (f.kind in ("categorical", "binned") and f.bag is None and params[name][2] is None and name not in single
                and name not in getattr(tree, "dropped", ())):  # skdb: no term past its s features
            out.naive[name] = out.add(_naive_padded(np.asarray(params[name][1], dtype=float)))
    return out


def prelude(p: Plan, mix: mixture.Mixture | None, features: Sequence[Feature], stats,
            input_types: Mapping[str, str] | None) -> list[tuple[str, exp.Expression]]:
    """The prelude columns :class:`Plan` reads (module docstring); ``features`` as scored.
    The lists of cell places (:meth:`Plan.reads`) read the positions by name, so they go
    in a SELECT around them (:func:`sqlnb.models.finish.scoring_select`)."""
    by_name = {f.name: f for f in features}
    types = input_types or {}
    out = []
    for a, name in enumerate(p.names if p.at is None else []):
        f = by_name[name]
        q = tan._position(f, tan.feature_values(f, stats.features), "duckdb", types.get(name))
        out.append((f"{POSITION_PREFIX}{a}", exp.Cast(
            this=exp.Coalesce(this=q, expressions=[exp.Literal.number(p.sizes[name])]),
            to=exp.DataType.build("BIGINT"))))
    if p.cells and not p.lists:
        p.lists[:] = [(f"{TABLE_PREFIX}{k}", sql.bound_list(row))
                      for k, row in enumerate(np.concatenate(p.cells, axis=1))]
        p.lists += [(STEPS, sql.bound_list(np.asarray(p.steps, dtype=np.int64), "BIGINT"))] if p.steps else []
    reads = dict((name, exp.Array(expressions=e)) for name, e in p.reads(mix))
    if p.deep:  # a deep KDB's children's places, then the naive rows'
        first = f"{READS_PREFIX}0"
        places = sql.col(PLACES)
        reads[first] = places if first not in reads else exp.Anonymous(this="list_concat",
                                                                        expressions=[places, reads[first]])
    deep = p.deep_columns() if p.deep else []
    return out + [(name, e.copy()) for name, e in p.lists] + deep + list(reads.items())


def _sum(name: str, k: int) -> exp.Expression:
    """``list_sum(list_select(sqlnb_tables<k>, name))``: class k's cells at the places the
    prelude list ``name`` holds, added left to right."""
    return exp.Anonymous(this="list_sum", expressions=[
        exp.Anonymous(this="list_select", expressions=[sql.col(f"{TABLE_PREFIX}{k}"), sql.col(name)])])


def terms(p: Plan, mix: mixture.Mixture | None, K: int, per_feature: bool = False
          ) -> tuple[dict[str, list], set, list, list]:
    """``(per feature its terms per class, the features whose terms are summed instead,
    per class their sum, per class the average's term)``. With ``per_feature`` (what
    ``explain`` weighs) a single tree's children and other discrete features each read
    their cell per class. Otherwise a single tree's children (their padded tables) and other discrete
    features (their naive rows) are one sum per class over one prelude list of places
    (:meth:`Plan.reads`), and there is no average; under an average ``mix`` the naive
    rows of every discrete feature are that sum, and the average's term is
    ``s_c + LN(Σ_s EXP(D_{s,c} − s_c)) − LN(S)`` (:func:`mixture.combine`), a tree
    member's D one sum per class over its own list (each child's padded table minus its
    padded naive row, cell by cell), AODE's its own prelude's (:func:`aode.padded_terms`).
    Each list's places are written once for every class, and each per-class term has a
    fixed size: the SELECT grows as the features, not as features × classes × members."""
    # deep KDB (skdb, kdb:3..5): each child's cell read at its place (a prelude column), with
    # the naive rows one sum per class; a feature skdb leaves out adds no term
    if per_feature and mix is None:
        reads = {**(p.children[0] if p.children else {}), **{name: (start, (name,)) for name, start in p.naive.items()}}
        each = {name: [p.read(start, axes, k) for k in range(K)] for name, (start, axes) in reads.items()}
        each |= {child: [_extract(sql.col(f"{TABLE_PREFIX}{k}"), p.place(child)) for k in range(K)] for child in p.deep}
        return each | {name: [sql.dbl(0.0) for _ in range(K)] for name in p.dropped}, set(), [], []
    lists = dict(p.reads(mix))
    first = f"{READS_PREFIX}0"
    covered = set(p.naive) | (set(p.children[0]) if mix is None and p.children else set()) | set(p.deep)
    direct = [_sum(first, k) for k in range(K)] if first in lists or p.deep else []
    if mix is None:
        return {}, covered | set(p.dropped), direct, []
    ratios = []
    for m, ((name, net), reads) in enumerate(zip(mix.nets, p.children)):
        column = f"{READS_PREFIX}{m + 1}"
        if name == "aode":
            ratios.append(aode.padded_terms(net))
        else:
            ratios.append([_sum(column, k) if column in lists else sql.dbl(0.0) for k in range(K)])
    return {}, covered, direct, mixture.combine(mix, ratios)
