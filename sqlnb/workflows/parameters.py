"""Every parameter a user reasons about, for each model kind (``sqlnb show --params``).

:func:`parameters` gives them as plain data (JSON-ready), derived by the model itself from
its stored statistics under the hyperparameters in force (``log_parameters`` for naive
Bayes; ``means_``, ``coef_``, ``intercept_``, ``covariance_`` and ``class_covariances`` for
LDA and QDA; ``coef_`` and ``intercept_`` for logistic regression), so nothing here
re-derives an estimate. Probabilities are given as probabilities (``exp`` of the model's
log-probabilities, so an MLE zero is ``0.0``); a number that is not finite (the
intercept of a class of prior 0) is ``null``. :func:`parameter_tables` lays them out as
titled tables, one row per feature (and value) and one column per class, which
:func:`parameters_text` prints as aligned text and the HTML report as tables.

==============  =========================================================================
kind            parameters
==============  =========================================================================
naive Bayes     class prior π_c; per feature by family: gaussian mean and variance per
                class (the variance with the ``var_smoothing`` floor added); categorical
                p(value | class) (and the unseen slot's, with ``unseen=bucket``);
                binned p(bin | class), the bins shown as intervals of the cut points;
                bernoulli p(present | class); multinomial p(feature | class) per count;
                complement the per-count weight; token bags: their number of terms
                (``sqlnb show --top-terms`` lists them)
lda             class prior, class means, coefficients ``Σ⁻¹ μ_c`` and intercepts
                ``−½ μ_cᵀ Σ⁻¹ μ_c + ln π_c`` (scikit-learn's, before its two-class collapse),
                the pooled covariance ``Σ`` (text: its diagonal)
qda             class prior, class means, each class's covariance (text: the diagonals)
logistic        scikit-learn's ``coef_`` and ``intercept_`` (one row, the second class's
                log-odds against the first, for two classes; in standardised units with
                ``standardize``, whose means and scales are given)
==============  =========================================================================
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from sqlnb.models.finish import label_text
from sqlnb.models.naive_bayes.families.binned import bin_label
from sqlnb.workflows.report import format_table

#: The title of each naive Bayes family's table, in the order the tables are printed.
FAMILY_TITLES = {
    "gaussian": "gaussian features: mean and variance per class",
    "categorical": "categorical features: p(value | class)",
    "binned": "binned features: p(bin | class)",
    "bernoulli": "bernoulli features: p(present | class)",
    "multinomial": "multinomial features: p(feature | class), per count",
    "complement": "complement features: weight per count",
}


def _num(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _nums(a: Any) -> Any:
    """An array as nested lists of floats, non-finite numbers as None."""
    a = np.asarray(a, dtype=float)
    if a.ndim == 0:
        return _num(a)
    return [_nums(x) for x in a]


def parameters(model) -> dict:
    """The model's parameters as plain data (see the module docstring)."""
    out: dict[str, Any] = {"kind": model.kind, "classes": list(model.classes)}
    if hasattr(model, "weights"):  # learnt weights over naive Bayes (sqlnb.models.naive_bayes.weighted)
        out.update(_naive_bayes(model.naive_bayes()))
        out["l2"] = model.l2
        out["weights"] = {"prior": _nums(model.prior_weights),
                          **{name: _nums(w) for name, w in model.weights.items()}}  # (classes, values)
    elif hasattr(model, "log_parameters"):
        out.update(_naive_bayes(model))
    elif model.kind in ("lda", "qda"):
        out["features"] = list(model.feature_names)
        out["prior"] = _nums(model.priors_)
        out["means"] = _nums(model.means_)
        if model.kind == "lda":
            out["shrinkage"] = model.params["shrinkage"]
            out["coef"] = _nums(model.coef_)
            out["intercept"] = _nums(model.intercept_)
            out["covariance"] = _nums(model.covariance_)
        else:
            out["reg_param"] = model.params["reg_param"]
            out["covariances"] = _nums(model.class_covariances())
    elif model.kind == "logistic":
        out["features"] = list(model.feature_names)
        out["C"] = model.C
        out["standardize"] = model.standardize
        # scikit-learn's layout: one row for two classes, the log-odds of the second class.
        out["coef_classes"] = list(model.classes[1:]) if len(model.classes) == 2 else list(model.classes)
        out["coef"] = _nums(model.coef_)
        out["intercept"] = _nums(model.intercept_)
        if model.standardize:
            out["standardized_mean"] = _nums(model.mean)
            out["standardized_scale"] = _nums(model.scale)
    return out


def _naive_bayes(model) -> dict:
    params = model.log_parameters()
    feats = []
    for f in model.features:
        p = params[f.name]
        d: dict[str, Any] = {"name": f.name, "kind": f.kind}
        if f.bag is not None:
            d["terms"] = len(p.terms)
        elif f.kind == "gaussian":
            d["mean"], d["var"] = _nums(p[0]), _nums(p[1])
        elif f.kind == "categorical":
            values, flp, unseen = p
            d["values"] = list(values)
            d["proba"] = _nums(np.exp(flp))  # (classes, values)
            d["unseen_proba"] = None if unseen is None else _nums(np.exp(unseen))
        elif f.kind == "binned":  # a categorical over the bins, shown as intervals
            values, flp, _ = p
            d["bins"], d["edges"] = f.bins, list(f.edges or ())
            d["values"] = [bin_label(f.edges or (), int(v)) for v in values]
            d["proba"] = _nums(np.exp(flp))  # (classes, bins)
        elif f.kind == "bernoulli":
            d["threshold"] = f.threshold
            d["proba_present"] = _nums(np.exp(p[0]))
        elif f.kind == "multinomial":
            d["proba"] = _nums(np.exp(p))
        else:  # complement
            d["weight"] = _nums(p)
        feats.append(d)
    out = {"prior": _nums(np.exp(params["prior"])), "features": feats}
    averaged = model.aode_summary() if hasattr(model, "aode_summary") else {}
    if averaged:  # AODE: which features' values may be super-parents (sqlnb.models.naive_bayes.aode)
        out["aode"] = averaged
    choice = model.skdb_summary() if hasattr(model, "skdb_summary") else {}
    if choice:  # skdb: its leave-one-out table (sqlnb.models.naive_bayes.skdb)
        out["skdb"] = {"k": choice["k"], "s": choice["s"], "order": choice["order"],
                       "rmse": [_nums(row) for row in choice["rmse"]]}
        if "backoff" in choice:  # backoff="loo": each feature's m per depth j = 1, 2, …
            out["skdb"]["backoff"] = dict(choice["backoff"])
    ensemble = model.eskdb_summary() if hasattr(model, "eskdb_summary") else {}
    if ensemble:  # eskdb: every member's ranking, parents, choice and m's (sqlnb.models.naive_bayes.eskdb)
        out["eskdb"] = ensemble
    average = model.average_summary() if hasattr(model, "average_summary") else {}
    if average:  # an average of structures (sqlnb.models.naive_bayes.mixture): its members' parents
        out["average"] = average
    conditionals = model.tree_conditionals() if hasattr(model, "tree_conditionals") else {}
    if conditionals:  # tree-augmented: each child's table given its parent (replaces its naive row)
        kinds = {f.name: f for f in model.features}

        def names(f, values):
            if f.kind == "binned":
                return [bin_label(f.edges or (), int(v)) for v in values]
            if f.kind == "bernoulli":
                return ["present" if v else "absent" for v in values]
            return list(values)

        def parent_rows(c):
            """The parent column's name and values; several parents (kdb:K): "p, q" and
            every combination of their values, "u, v" (only those seen in training when
            ``configs`` lists them: skdb's back-off tables), the table flattened to
            (classes, combinations, values)."""
            if isinstance(c["parent"], str):
                return c["parent"], names(kinds[c["parent"]], c["parent_values"]), c["log_proba"]
            each = [names(kinds[p], vs) for p, vs in zip(c["parent"], c["parent_values"])]
            lp = c["log_proba"]
            combos = c.get("configs") or list(itertools.product(*(range(len(e)) for e in each)))
            at = [int(np.ravel_multi_index(t, lp.shape[1:-1])) for t in combos]
            return (", ".join(c["parent"]), [", ".join(label_text(each[i][u]) for i, u in enumerate(t)) for t in combos],
                    lp.reshape(lp.shape[0], -1, lp.shape[-1])[:, at])

        out["tree"] = []
        for child, c in conditionals.items():
            parent, parent_values, log_proba = parent_rows(c)
            out["tree"].append({"child": child, "parent": parent, "parent_values": parent_values,
                                "values": names(kinds[child], c["values"]),
                                "proba": _nums(np.exp(log_proba))})  # (classes, parent values, values)
    return out


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


Table = tuple[str, list[str], list[list[str]], str]


def parameter_tables(d: dict) -> list[Table]:
    """:func:`parameters`' data as ``(title, header, rows, align)`` tables of text cells."""
    classes = [label_text(c) for c in d["classes"]]
    tables: list[Table] = []

    def table(title: str, first: Sequence[str], rows: list[list[Any]], columns: Sequence[str] = classes) -> None:
        cells = [[_fmt(c) if not isinstance(c, str) else c for c in r] for r in rows]
        tables.append((title, [*first, *columns], cells, "l" * len(first) + "r" * len(columns)))

    if d.get("prior") is not None:
        table("class prior", [""], [["prior", *d["prior"]]])
    if "coef_classes" in d:  # logistic
        cols = [label_text(c) for c in d["coef_classes"]]
        units = " (standardised units)" if d["standardize"] else ""
        rows = [[name, *(row[j] for row in d["coef"])] for j, name in enumerate(d["features"])]
        rows.append(["(intercept)", *d["intercept"]])
        title = ("coefficients: log-odds of " + cols[0] + f" against {classes[0]}" if len(cols) == 1
                 else "coefficients per class") + units
        table(title, ["feature"], rows, cols)
        if d["standardize"]:
            table("standardisation", ["feature"],
                  [[n, m, s] for n, m, s in zip(d["features"], d["standardized_mean"], d["standardized_scale"])],
                  ["mean", "scale"])
        return tables
    if "means" in d:  # lda, qda
        names = d["features"]
        table("class means", ["feature"], [[n, *(row[j] for row in d["means"])] for j, n in enumerate(names)])
        if "coef" in d:
            rows = [[n, *(row[j] for row in d["coef"])] for j, n in enumerate(names)]
            table("coefficients Σ⁻¹ μ_c and intercepts", ["feature"], rows + [["(intercept)", *d["intercept"]]])
            shrink = f", shrinkage {d['shrinkage']:g}" if d.get("shrinkage") is not None else ""
            table(f"pooled covariance Σ{shrink}: variances (the diagonal; --format json gives the matrix)",
                  ["feature"], [[n, d["covariance"][j][j]] for j, n in enumerate(names)], ["variance"])
        else:
            reg = f", reg_param {d['reg_param']:g}" if d.get("reg_param") else ""
            table(f"class covariances{reg}: variances (the diagonals; --format json gives the matrices)",
                  ["feature"], [[n, *(cov[j][j] for cov in d["covariances"])] for j, n in enumerate(names)])
        return tables
    by_kind: dict[str, list[dict]] = {}
    for f in d.get("features", []):
        by_kind.setdefault("bags" if "terms" in f else f["kind"], []).append(f)
    for kind, title in FAMILY_TITLES.items():
        feats = by_kind.get(kind, [])
        if not feats:
            continue
        if kind == "gaussian":
            rows = [[f["name"], stat, *f[key]] for f in feats for stat, key in (("mean", "mean"), ("var", "var"))]
            table(title, ["feature", ""], rows)
        elif kind in ("categorical", "binned"):
            rows = []
            for f in feats:
                rows += [[f["name"], label_text(v), *(p[j] for p in f["proba"])] for j, v in enumerate(f["values"])]
                if f.get("unseen_proba") is not None:
                    rows.append([f["name"], "(unseen)", *f["unseen_proba"]])
            table(title, ["feature", "value"], rows)
        else:
            key = {"bernoulli": "proba_present", "multinomial": "proba", "complement": "weight"}[kind]
            table(title, ["feature"], [[f["name"], *f[key]] for f in feats])
    for t in d.get("tree", []):
        rows = [[label_text(pv), label_text(v), *(p[i][j] for p in t["proba"])]
                for i, pv in enumerate(t["parent_values"]) for j, v in enumerate(t["values"])]
        table(f"tree: p({t['child']} | class, {t['parent']}), which replaces {t['child']}'s row above",
              [t["parent"], t["child"]], rows)
    if d.get("skdb"):  # the selective KDB's leave-one-out table
        sel = d["skdb"]
        table(f"skdb: leave-one-out RMSE of p(true class), k parents (rows) by the first s features by I(X; C) "
              f"(columns: {', '.join(sel['order'])}); chosen k = {sel['k']}, s = {sel['s']}", ["k"],
              [[str(k), *row] for k, row in enumerate(sel["rmse"])], [str(j + 1) for j in range(len(sel["order"]))])
        if sel.get("backoff"):
            depth = max(map(len, sel["backoff"].values()), default=0)
            table("skdb: back-off pseudo-count m chosen by leave-one-out, per feature and depth j (its first j "
                  "parents; a feature past s or a depth past k is not used)", ["feature"],
                  [[name, *(f"{m:g}" for m in ms), *[""] * (depth - len(ms))] for name, ms in sel["backoff"].items()],
                  [str(j) for j in range(1, depth + 1)])
    if d.get("eskdb"):  # an ensemble of selective KDBs: one row per member and feature, in its ranking
        e = d["eskdb"]
        table(f"eskdb: {len(e['members'])} members (tau {e['temperature']:g}, seeds [{e['seed']}, member]); each "
              "member's features in its ranking, each with its ranked parent list and its back-off m per depth; a "
              "member keeps its first s features, each on the first k of its parents", ["member", "k", "s", "rank",
              "feature", "parents (ranked)", "m (depth 1, 2, …)"],
              [[str(t), str(m["k"]), str(m["s"]), str(r + 1), name + ("" if r < m["s"] else " (past s)"),
                ", ".join(m["parents"][name]), ", ".join(f"{v:g}" for v in m.get("backoff", {}).get(name, []))]
               for t, m in enumerate(e["members"]) for r, name in enumerate(m["order"])], [])
    if "aode" in d:
        a = d["aode"]
        table(f"aode: super-parents (values seen at least m = {a['min_count']:g} times); every score averages "
              "p(c, x_i) Π p(x_j | c, x_i) over the row's super-parents", ["feature"],
              [[name, s["values"], s["eligible"]] for name, s in a["super_parents"].items()], ["values", "eligible"])
    if "average" in d:
        a = d["average"]
        table(f"{a['structure']}: the mean of these structures' joint probabilities, each feature's parents "
              "in each", ["structure", "parents"], [[m["structure"], "; ".join(
                  f"{c} <- {p if isinstance(p, str) else ', '.join(p)}" for c, p in m.get("parents", {}).items())
                  or ("every feature in turn, of all others" if m["structure"] == "aode" else "none")]
                  for m in a["members"]], [])
    if "weights" in d:  # the learnt weights: each multiplies the log-probability above it
        w = d["weights"]
        rows = [["(class prior)", "", *w["prior"]]]
        for f in d["features"]:
            rows += [[f["name"], label_text(v), *(row[j] for row in w[f["name"]])] for j, v in enumerate(f["values"])]
        table(f"weights learnt with l2 = {d['l2']:g}: a class scores Σ weight × ln p (the probabilities above "
              "are naive Bayes's, from the counts)", ["feature", "value"], rows)
    for f in by_kind.get("bags", []):
        tables.append((f"token bag {f['name']} ({f['kind']}): {f['terms']:,} terms; "
                       "sqlnb show --top-terms N lists the most telling", [], [], ""))
    return tables


def parameters_text(d: dict) -> str:
    """:func:`parameter_tables` as aligned text."""
    parts = []
    for title, header, rows, align in parameter_tables(d):
        parts.append(title if not header else title + "\n" + format_table(header, rows, align, indent="  "))
    return "\n\n".join(parts)
