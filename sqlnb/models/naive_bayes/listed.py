"""DuckDB's scoring of the structures over discrete features (TAN, KDB, and averages of
structures such as ``tan+kdb:2+aode``) from prelude columns: each discrete feature's value
position computed once per row, and every table the SELECT reads held in one list per
class, written once.

Prelude (:func:`prelude`, columns of the SELECT around the source)::

    sqlnb_position<a>   COALESCE(q_a, n_a)      the a-th discrete feature's 0-based value
                                                position q_a (:func:`tan._position`); n_a,
                                                its missing slot, when NULL, NaN or unseen
    sqlnb_tables<c>     [cells…]                class c's cells of every table below, one
                                                packed literal (:func:`sqlnb.sql.packed_list`)

Each term is then one read ``list_extract(sqlnb_tables<c>, start + index + 1)``, ``index``
the row-major position in a table padded with a missing slot per axis
(:func:`tan.padded_cells`) and ``start`` the table's first cell in the list:

* a tree child (TAN, KDB): its padded table, parents first (a missing child reads 0,
  missing parents the table of the parents present: :func:`tan.padded_read`'s cells);
* a discrete feature that is no child (a root, or any under an average): its naive Bayes
  row ln p(x | c) and 0 in the missing slot;
* under an average, a tree member's log-ratio D_{s,c} (:mod:`.mixture`): per child one
  read of its padded table minus its padded naive row, cell by cell, summed in the
  children's order (the same doubles as ``Σ (t − n)`` of the portable form).

An AODE member reads its own prelude (:func:`aode.prelude`, :func:`aode.padded_terms`),
whose slots then give every position (``slot − G − 1``, :func:`aode.slot_positions`), so
that no position is written twice.
So the SELECT grows as the number of features (each term one read of fixed size) and the
tables as their cells; on 6a739ab each TAN or KDB term repeated its positions' expressions
and held a literal of its own table, and an average re-wrote every member's terms with
one literal per AODE pair table (breast cancer's 30 binned columns: 3.6 MB and 22 s for
one row, ``benchmarks/structured_scoring.py``).
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
STEPS = "sqlnb_trie"


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
    lists: list = field(default_factory=list, init=False)  # :func:`prelude`'s packed lists, built once
    #: deep KDB (:mod:`.skdb`): each child's ``(start, n_child, [(step start, base, n_pa, parent)…])``,
    #: and every child's trie steps in one integer list
    deep: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)
    dropped: list = field(default_factory=list)  # skdb: the features past its s, no term

    def add(self, table: np.ndarray) -> int:
        """Append a (K, …) table's cells; returns its 0-based start in the list."""
        flat = np.asarray(table, dtype=float).reshape(table.shape[0], -1)
        start = self.width
        self.cells.append(flat)
        self.width += flat.shape[1]
        return start

    def position(self, name: str) -> exp.Expression:
        return sql.col(f"{POSITION_PREFIX}{self.names.index(name)}") if self.at is None else self.at[name].copy()

    def deep_read(self, child: str, k: int) -> exp.Expression:
        """A deep KDB child's term (:func:`skdb.trie`): node l_0 = 0, l_j = the trie step
        from l_{j−1} by pa_j's position (NULL when unseen; NULL stays NULL), the row of the
        deepest node reached, ``COALESCE(base_L + l_L, …, base_1 + l_1, 0)``, then the
        child's slot in it."""
        start, n_x, steps = self.deep[child]
        node: exp.Expression = exp.Literal.number(0)
        rows = []
        for at, base, n_pa, parent in steps:
            index = exp.Add(this=exp.Add(this=exp.Mul(this=sql.paren(node), expression=exp.Literal.number(n_pa + 1)),
                                         expression=self.position(parent)), expression=exp.Literal.number(at + 1))
            node = exp.Nullif(this=exp.Anonymous(this="list_extract", expressions=[sql.col(STEPS), index]),
                              expression=exp.Literal.number(-1))
            rows.insert(0, exp.Add(this=exp.Literal.number(base), expression=node.copy()))
        row = exp.Coalesce(this=rows[0], expressions=[*rows[1:], exp.Literal.number(0)])
        index = exp.Add(this=exp.Mul(this=sql.paren(row), expression=exp.Literal.number(n_x + 1)),
                        expression=self.position(child))
        return exp.Anonymous(this="list_extract", expressions=[
            sql.col(f"{TABLE_PREFIX}{k}"), exp.Add(this=index, expression=exp.Literal.number(start + 1))])

    def read(self, start: int, axes: Sequence[str], k: int) -> exp.Expression:
        """``list_extract(sqlnb_tables<k>, start + 1 + row-major index of the axes' positions)``."""
        index: exp.Expression | None = None
        for name in axes:
            q = sql.col(f"{POSITION_PREFIX}{self.names.index(name)}") if self.at is None else self.at[name].copy()
            index = q if index is None else exp.Add(
                this=exp.Mul(this=sql.paren(index), expression=exp.Literal.number(self.sizes[name] + 1)), expression=q)
        index = exp.Add(this=index, expression=exp.Literal.number(start + 1))
        return exp.Anonymous(this="list_extract", expressions=[sql.col(f"{TABLE_PREFIX}{k}"), index])


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


def prelude(p: Plan, features: Sequence[Feature], stats, input_types: Mapping[str, str] | None
            ) -> list[tuple[str, exp.Expression]]:
    """The prelude columns :class:`Plan` reads (module docstring); ``features`` as scored."""
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
        p.lists[:] = [(f"{TABLE_PREFIX}{k}", sql.packed_list([float(w) for w in row], "DOUBLE"))
                      for k, row in enumerate(np.concatenate(p.cells, axis=1))]
        p.lists += [(STEPS, sql.packed_list(p.steps, "BIGINT"))] if p.steps else []
    return out + [(name, e.copy()) for name, e in p.lists]


def terms(p: Plan, mix: mixture.Mixture | None, K: int) -> tuple[dict[str, list], list]:
    """``(per feature its terms per class, per class the average's term)``: a single tree's
    children (their padded tables) and other discrete features (their naive rows) one read
    per class, and no average; under an average ``mix``, every discrete feature's naive
    read and ``s_c + LN(Σ_s EXP(D_{s,c} − s_c)) − LN(S)`` (:func:`mixture.combine`), a tree
    member's D its children's reads summed in order, AODE's its own prelude's
    (:func:`aode.padded_terms`)."""
    out = {name: [p.read(start, (name,), k) for k in range(K)] for name, start in p.naive.items()}
    out |= {child: [p.deep_read(child, k) for k in range(K)] for child in p.deep}
    out |= {name: [sql.dbl(0.0) for _ in range(K)] for name in p.dropped}
    if mix is None and not p.children:  # deep KDB (its reads above)
        return out, []
    if mix is None:
        return {**{child: [p.read(start, axes, k) for k in range(K)]
                   for child, (start, axes) in p.children[0].items()}, **out}, []
    ratios = []
    for (m, net), reads in zip(mix.nets, p.children):
        if m == "aode":
            ratios.append(aode.padded_terms(net))
        else:
            ratios.append([sql.add([p.read(start, axes, k) for start, axes in reads.values()]) if reads
                           else sql.dbl(0.0) for k in range(K)])
    return out, mixture.combine(mix, ratios)
