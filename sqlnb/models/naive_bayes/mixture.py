"""The average of several structures' joint probabilities (``structure="tan+kdb:2+aode"``):
one generative model whose joint is the mean of its members' joints, all derived from the
same counts.

Formula. For members s = 1 … S (each one of ``naive``, ``tan``, ``kdb:1``, ``kdb:2``,
``aode``, named once, joined by ``+``)::

    p(c, x) = (1/S) Σ_s p_s(c, x)

with p_s the joint that ``structure=s`` alone gives from the same statistics, α,
estimator and class prior. Every member's log joint is the naive Bayes score NB_c(x)
(:meth:`NaiveBayes.class_terms` without a structure) plus a log-ratio D_{s,c}(x)::

    naive              D = 0
    tan, kdb:K         D = Σ_children [t_child(c, x) − n_child(c, x)]
                            t the child's term under the structure (:func:`tan.child_terms`,
                            :func:`kdb.child_terms`), n its naive Bayes term (0 when missing)
    aode               D = AODE's own term (:func:`aode.terms`: its average over super-parents)

so the class score is::

    ln p(c, x) = NB_c(x) + s_c + ln Σ_s exp(D_{s,c}(x) − s_c) − ln S

Numerics, as AODE's (:mod:`sqlnb.models.naive_bayes.aode`): s_c is a per-class constant
from the tables, the midpoint of the smallest and largest D any member can reach (0 when
both lie within ±:data:`~sqlnb.models.naive_bayes.aode.EXP_SAFE`), bounded child by child
(each term reads one cell of its tables or is 0); a model whose bounds span more than
2·EXP_SAFE is refused at fit. The members' tables must be finite (no −inf cell: α > 0
under the posterior mean, or α > 1 under MAP): a −inf naive term next to a −inf tree
term would make their difference undefined, so such a model is refused in one line.

Statistics: the members' own (pair counts; a ``kdb:2`` member's joint counts of three),
gathered by the same scans a fit of the member alone makes, so ``update``, ``cv`` and
``with_params`` work as for each member. Which members to average (and α) is a choice
to make by cross-validation: ``cv --grid structure=tan+kdb:2+aode,tan``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import aode, kdb, tan
from sqlnb.models.naive_bayes.families import Feature

#: The structures a mixture may average.
MEMBERS = ("naive", "tan", "aode", "kdb:1", "kdb:2")


def members(structure: Any) -> list[str] | None:
    """The member structures of ``"a+b+…"``; None for a structure that is not a mixture.
    Raises for a mixture with an unknown or repeated member, or fewer than two."""
    if not isinstance(structure, str) or "+" not in structure:
        return None
    parts = [p.strip() for p in structure.split("+")]
    for p in parts:
        if p not in MEMBERS:
            raise SqlnbError(f"structure {structure!r}: {p!r} cannot be averaged; an average of structures joins "
                             f"two or more of {', '.join(MEMBERS)} with '+', e.g. 'tan+kdb:2+aode'")
    if len(set(parts)) != len(parts) or len(parts) < 2:
        raise SqlnbError(f"structure {structure!r}: name each averaged structure once, two or more of them "
                         f"(e.g. 'tan+kdb:2+aode')")
    return parts


def has_member(structure: Any, member: str) -> bool:
    """Whether ``structure`` is ``member`` or an average with it.

    Cross-validation scores AODE's fold models fold by fold rather than in one pooled query
    (:mod:`sqlnb.workflows.cv`): each reads lists of every (super-parent, child) cell, and
    the pooled query holds all of them at once. Spambase (57 binned columns, 3,680 training
    rows, 5 folds): AODE at one α took 63 s and 3.6 GB pooled, 6.4 s and 0.4 GB fold by
    fold; TAN, KDB(1) and AODE at three α each (45 models) ran out of memory pooled, 16 s
    and 0.6 GB fold by fold. The scoring work is the same (a row is scored once per grid
    point); fold by fold reads the training copy k times instead of once."""
    return isinstance(structure, str) and member in (members(structure) or [structure])


def needs_pairs(structure: Any) -> bool:
    """Whether any member needs the pair counts (every member but ``naive`` does)."""
    found = members(structure)
    return found is not None and any(tan.needs_pairs(m) for m in found)


def joint_order(structure: Any) -> int | None:
    """K of the joint counts a model of ``structure`` needs: a ``kdb:K`` structure's K, or
    the largest K among a mixture's ``kdb:K`` members; None when none."""
    found = members(structure)
    if found is None:
        return kdb.order_of(structure)
    orders = [k for k in map(kdb.order_of, found) if k]
    return max(orders) if orders else None


@dataclass
class Mixture:
    """The derived members: ``(structure, network)`` with the network a :class:`tan.Tree`,
    :class:`kdb.Network`, :class:`aode.Aode` or None (naive); ``shift`` (K,) is s_c."""

    structure: str
    nets: list
    shift: np.ndarray


def _finite(name: str, table: np.ndarray, structure: str) -> None:
    if not np.all(np.isfinite(table)):
        raise SqlnbError(f"structure {structure!r}: feature {name!r} has a probability 0 in its tables (ln 0 = "
                         "-inf), which an average of structures cannot hold; smooth it (alpha > 0 with the "
                         "posterior mean, the default)")


def _tree_bounds(net, params: Mapping[str, Any], by_name: Mapping[str, Feature], structure: str):
    """Per class, the smallest and largest D of a tree member (TAN or KDB)."""
    K = next(iter(net.cpt.values())).shape[0] if net.cpt else 0
    lo, hi = np.zeros(K), np.zeros(K)
    for child in net.parent:
        naive = tan.naive_row(by_name[child], params[child])
        _finite(child, naive, structure)
        tables = [net.cpt[child], *getattr(net, "fallback", {}).get(child, {}).values()]
        c_lo, c_hi = np.zeros(K), np.zeros(K)  # a missing child adds 0
        for t in tables:
            _finite(child, t, structure)
            d = (t - naive.reshape(K, *([1] * (t.ndim - 2)), -1)).reshape(K, -1)
            if d.size:
                c_lo, c_hi = np.minimum(c_lo, d.min(axis=1)), np.maximum(c_hi, d.max(axis=1))
        lo, hi = lo + c_lo, hi + c_hi
    return lo, hi


def _aode_bounds(net: aode.Aode, K: int, structure: str):
    """Per class, the smallest and largest AODE term: an average of exp(T_i) lies between
    the smallest and largest T_i (0 when no super-parent)."""
    lo, hi = np.zeros(K), np.zeros(K)
    for f in net.features:
        t_lo, t_hi = np.zeros(K), np.zeros(K)
        for (i, j), r in net.ratio.items():
            if i == f.name and r.size:
                _finite(j, r, structure)
                t_lo += np.minimum(0.0, r.reshape(K, -1).min(axis=1))
                t_hi += np.maximum(0.0, r.reshape(K, -1).max(axis=1))
        lo, hi = np.minimum(lo, t_lo), np.maximum(hi, t_hi)
    return lo, hi


def derive(features: Sequence[Feature], stats, hp, params: Mapping[str, Any]) -> Mixture:
    """Each member's network and the per-class shift (module docstring)."""
    structure = hp.structure
    K = len(stats.classes)
    by_name = {f.name: f for f in features}
    nets, lows, highs = [], [np.zeros(K)], [np.zeros(K)]
    for m in members(structure):
        if m == "naive":
            net = None
        elif m == "tan":
            net = tan.derive(features, stats, hp, params)
        elif m == "aode":
            net = aode.derive(features, stats, hp, params)
        else:
            net = kdb.derive(features, stats, hp, params, kdb.order_of(m))
        if net is not None:
            lo, hi = _aode_bounds(net, K, structure) if m == "aode" else _tree_bounds(net, params, by_name, structure)
            lows.append(lo)
            highs.append(hi)
        nets.append((m, net))
    bottom, top = np.min(lows, axis=0), np.max(highs, axis=0)
    if np.any(top - bottom > 2 * aode.EXP_SAFE):
        raise SqlnbError(
            f"structure {structure!r}: a member's log-likelihood ratio against naive Bayes can span "
            f"{float(np.max(top - bottom)):.0f} nats, past the {2 * aode.EXP_SAFE:.0f} its log-sum-exp holds "
            "exactly; smooth more (a larger --alpha) or choose fewer columns (--features / --exclude)")
    inside = (top <= aode.EXP_SAFE) & (bottom >= -aode.EXP_SAFE)
    return Mixture(structure, nets, np.where(inside, 0.0, (top + bottom) / 2))


def _ratios(mix: Mixture, features: Sequence[Feature], stats, params: Mapping[str, Any], dialect: str | None,
            input_types: Mapping[str, str] | None) -> list[list[exp.Expression]]:
    """Per member, per class, D_{s,c}(x) (module docstring)."""
    by_name = {f.name: f for f in features}
    out = []
    for m, net in mix.nets:
        K = len(mix.shift)
        if net is None:
            out.append([sql.dbl(0.0) for _ in range(K)])
        elif m == "aode":
            out.append(aode.terms(net, features, stats, dialect, input_types))
        else:
            module = kdb if isinstance(net, kdb.Network) else tan
            positions = tan.tree_positions(net, features, stats, dialect, input_types)
            terms = module.child_terms(net, features, stats, params, dialect, input_types, positions)
            per_class = []
            for k in range(K):
                diffs = []
                for child, t in terms.items():
                    naive = tan.naive_row(by_name[child], params[child])[k]
                    n = exp.Coalesce(this=tan._pick(positions[child].copy(), naive, dialect),
                                     expressions=[sql.dbl(0.0)])
                    diffs.append(exp.Sub(this=sql.paren(t[k]), expression=sql.paren(n)))
                per_class.append(sql.add(diffs) if diffs else sql.dbl(0.0))
            out.append(per_class)
    return out


def terms(mix: Mixture, features: Sequence[Feature], stats, params: Mapping[str, Any], dialect: str | None,
          input_types: Mapping[str, str] | None) -> list[exp.Expression]:
    """Per class, the term the average adds to the naive Bayes class score:
    ``s_c + LN(Σ_s EXP(D_{s,c} − s_c)) − LN(S)``."""
    return combine(mix, _ratios(mix, features, stats, params, dialect, input_types))


def combine(mix: Mixture, ratios: Sequence[Sequence[exp.Expression]]) -> list[exp.Expression]:
    """Per class, ``s_c + LN(Σ_s EXP(D_{s,c} − s_c)) − LN(S)`` of the members' D_{s,c}
    (``ratios[s][c]``): :func:`terms`, and DuckDB's form of the D read from prelude lists
    (:mod:`sqlnb.models.naive_bayes.listed`)."""
    S = len(ratios)
    out = []
    for k, s in enumerate(mix.shift):
        s = float(s)
        parts = [exp.Exp(this=sql.paren(r[k]) if s == 0.0 else exp.Sub(this=sql.paren(r[k]), expression=sql.dbl(s)))
                 for r in ratios]
        value = exp.Ln(this=sql.paren(sql.add(parts)))
        out.append(exp.Sub(this=sql.add([sql.dbl(s), value]) if s != 0.0 else value,
                           expression=sql.dbl(float(np.log(S)))))
    return out


def describe(mix: Mixture) -> dict:
    """What ``show --params`` prints: the members, each tree member's parents, the shift."""
    out: dict[str, Any] = {"structure": mix.structure, "members": []}
    for m, net in mix.nets:
        entry: dict[str, Any] = {"structure": m}
        if net is not None and m != "aode":
            entry["parents"] = {c: p if isinstance(p, str) else list(p) for c, p in net.parent.items()}
        out["members"].append(entry)
    out["shift"] = [float(s) for s in mix.shift]
    return out
