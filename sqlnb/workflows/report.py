"""Descriptions of models for people and for scripts (``sqlnb show``, ``sqlnb models``).

:func:`describe` turns a model into plain data (JSON-ready); :func:`show_text` and
:func:`models_text` lay that data out as aligned text. Top features rank each naive
Bayes feature within its family by how much it tells about the class
(:mod:`sqlnb.workflows.importance`: mutual information in nats for categorical and
Bernoulli features, so that a perfectly separating feature ranks first, also under MLE
where its log-probabilities are −inf; the spread of the per-count weight for multinomial
and complement features; the spread of the class means in standard deviations for
Gaussian ones).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from sqlnb.models.finish import class_columns, label_text
from sqlnb.workflows.importance import MEASURES, top_features


def fmt_count(n: Any) -> str:
    return f"{int(n):,}" if n is not None else "n/a"


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None,
                 indent: str = "") -> str:
    """Columns padded to their widest cell; ``align`` holds ``l`` or ``r`` per column."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[j]) for r in cells) for j in range(len(header))]
    align = align or "l" * len(header)
    lines = []
    for r in cells:
        parts = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(r, widths, align)]
        lines.append((indent + "  ".join(parts)).rstrip())
    return "\n".join(lines)


def _features(model) -> list[dict]:
    """Name, kind, SQL type (and family details) of every feature, any model kind."""
    feats = getattr(model, "features", None)
    if isinstance(feats, dict):  # dense models (LDA, QDA, logistic): name -> SQL type
        return [{"name": k, "kind": "numeric", "type": t} for k, t in feats.items()]
    out = []
    stats = getattr(model, "stats", None)
    tree = model.tree() if hasattr(model, "tree") else {}  # tree-augmented: each feature's parent
    choice = model.skdb_summary() if hasattr(model, "skdb_summary") else {}
    dropped = set(choice["order"][choice["s"]:]) if choice else set()  # skdb: past the s features kept
    for f in feats or []:
        d = {"name": f.name, "kind": f.kind, "type": f.sql_type}
        if f.name in dropped:
            d["dropped"] = True
        if f.name in tree:
            d["parent"] = tree[f.name] if isinstance(tree[f.name], str) else ", ".join(tree[f.name])  # kdb:K
        if f.kind == "bernoulli":
            d["threshold"] = f.threshold
        if f.kind == "categorical" and stats is not None:
            d["values"] = len(stats.features[f.name].values)
        if f.kind == "binned":
            d["bins"] = f.bins
            d["edges"] = list(f.edges or ())
        out.append(d)
    return out


def _classes(model, tables: dict) -> list[dict]:
    """Per class: its label, its probability column (``proba_<label>`` unless that would
    be ambiguous, see :func:`sqlnb.models.finish.class_columns`), rows, weight, prior."""
    out = []
    stats = getattr(model, "stats", None)
    columns = class_columns("proba_", model.classes)
    prior = np.exp(model.log_parameters()["prior"]) if hasattr(model, "log_parameters") else None
    # Other model kinds keep their training rows per class in the "classes" part.
    part = tables["classes"][0].to_pydict() if "classes" in tables else {}
    for k, c in enumerate(model.classes):
        d: dict[str, Any] = {"label": c, "column": columns[k]}
        if stats is not None:
            d["rows"] = int(round(float(stats.class_rows[k])))
            d["weight"] = float(stats.class_n[k])
        elif "n" in part:
            d["rows"] = int(round(float(part["n"][k])))
        if prior is not None:
            d["prior"] = float(prior[k])
        out.append(d)
    return out


def _hyperparameters(model) -> dict:
    meta = model.metadata()
    if "hyperparameters" in meta:  # naive Bayes's, and the weights' penalty of a weighted model
        return {**meta["hyperparameters"], **({"l2": meta["l2"]} if "l2" in meta else {})}
    skip = {"label", "label_type", "features", "report", "weight", "kind", "classes"}
    return {k: v for k, v in meta.items() if k not in skip}


def _likelihood(model) -> dict | None:
    """Training log-likelihood and BIC (naive Bayes; None for other kinds)."""
    if model.kind != "naive_bayes":
        return None
    from sqlnb.models.naive_bayes.likelihood import summary
    return summary(model)


def _selection(model) -> dict | None:
    """``skdb``'s choice and leave-one-out table, JSON-ready (rows k = 0 … K, columns
    s = 1 … F); None for other models."""
    choice = model.skdb_summary() if hasattr(model, "skdb_summary") else {}
    if not choice:
        return None
    return {"k": choice["k"], "s": choice["s"], "order": choice["order"],
            "rmse": [[float(v) if np.isfinite(v) else None for v in row] for row in choice["rmse"]],
            "zero_one": [[float(v) if np.isfinite(v) else None for v in row] for row in choice["zero_one"]],
            **({"backoff": dict(choice["backoff"])} if "backoff" in choice else {})}


def selection_text(sel: dict, indent: str = "             ") -> list[str]:
    """What ``sqlnb show`` says of an ``skdb`` choice: k, the features kept, and the
    leave-one-out RMSE table (k down, number of features across)."""
    k, s = sel["k"], sel["s"]
    lines = [f"skdb         k = {k} parents, the first {s} of {len(sel['order'])} features by I(X; C) "
             f"(leave-one-out RMSE {sel['rmse'][k][s - 1]:.4f}, 0-1 loss {sel['zero_one'][k][s - 1]:.4f}):"]
    header = ["k \\ s", *(str(j + 1) for j in range(len(sel["order"])))]
    rows = [[str(i), *("n/a" if v is None else f"{v:.4f}" for v in row)] for i, row in enumerate(sel["rmse"])]
    lines += format_table(header, rows, indent=indent, align="l" + "r" * len(sel["order"])).splitlines()
    if sel.get("backoff") and k:  # backoff="loo": the m's the kept features use, depth 1 … k
        used = [f"{c} {', '.join(f'{m:g}' for m in sel['backoff'][c][:k])}" for c in sel["order"][:s]
                if sel["backoff"][c]]
        lines.append(f"{indent}back-off m by leave-one-out (depth 1, 2, …): {'; '.join(used)}")
    return lines


def ensemble_text(ens: dict, indent: str = "             ", shown: int = 6) -> list[str]:
    """What ``sqlnb show`` says of an ``eskdb`` ensemble: how many members and how they
    differ, then per member its k, s, leave-one-out RMSE and 0-1 loss, and its kept
    features, first ranked first (the first ``shown`` of them; ``show --params`` has every
    parent and m)."""
    members = ens["members"]
    lines = [f"eskdb        {len(members)} member{'s' * (len(members) != 1)}, each a selective KDB (k <= {ens['k_max']}) over its own "
             f"Gumbel-perturbed ranking and parents (tau {ens['temperature']:g}); the score is the log of their mean "
             "posterior:"]
    rows = [[str(t), str(m["k"]), str(m["s"]), f"{m['rmse']:.4f}", f"{m['zero_one']:.4f}",
             ", ".join(m["order"][:min(m["s"], shown)]) + (f", … ({m['s'] - shown} more)" if m["s"] > shown else "")]
            for t, m in enumerate(members)]
    return lines + format_table(["member", "k", "s", "RMSE", "0-1 loss", "kept features, first ranked first"], rows,
                                indent=indent, align="lrrrrl").splitlines()


def describe(model, top: int = 5) -> dict:
    """A JSON-ready description: spec, classes, features, hyperparameters, sizes, top
    features and provenance."""
    tables = model.parameter_tables()
    return {
        "name": getattr(model, "name", None),
        "kind": model.kind,
        "label": model.label,
        "label_type": model.label_type,
        "weight": getattr(model, "weight", None),
        "classes": _classes(model, tables),
        "features": _features(model),
        "hyperparameters": _hyperparameters(model),
        "size": {"classes": len(model.classes), "features": len(model.feature_names),
                 "parameter_tables": len(tables),
                 "parameter_rows": sum(int(t.num_rows) for t, _ in tables.values())},
        "top_features": top_features(model, top),
        "likelihood": _likelihood(model),
        "skdb": _selection(model),
        "eskdb": (model.eskdb_summary() if hasattr(model, "eskdb_summary") else {}) or None,
        "trained": dict(model.report),
        "calibration": model.calibration.describe() if getattr(model, "calibration", None) else None,
        "conformal": model.conformal.describe(model.classes) if getattr(model, "conformal", None) else None,
        "created": getattr(model, "created", None),
        "versions": getattr(model, "versions", None) or {},
    }


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def feature_detail(f: dict) -> str:
    """What ``sqlnb show`` says of one feature of :func:`describe` after its kind and type:
    its values, threshold or bins, and its tree parent."""
    parent = f", parent {f['parent']}" if "parent" in f else ", no term (left out by skdb)" if f.get("dropped") else ""
    if "values" in f:
        return f"{f['values']} values{parent}"
    if "threshold" in f:
        return f"present when > {_value(f['threshold'])}{parent}"
    if "edges" in f:
        if not f["edges"]:
            return f"1 bin ({f['bins']}: no cut point; carries no information){parent}"
        return (f"{len(f['edges']) + 1} bins ({f['bins']}), cut at {', '.join(f'{e:.6g}' for e in f['edges'])}"
                f"{parent}")
    return parent[2:]


def show_text(d: dict, provenance: bool = True) -> str:
    """Lay out :func:`describe`'s data as text (``provenance=False`` leaves out the
    creation time, duration and versions, e.g. for a reproducible demo)."""
    kinds: dict[str, int] = {}
    for f in d["features"]:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    trained = d["trained"]
    batches = trained.get("batches") or []
    first = batches[0] if batches else trained  # after updates: the fit's own rows
    lines = [f"model        {d['name'] if d['name'] is not None else '(unsaved)'} ({d['kind']})",
             f"label        {d['label']} ({d['label_type']}), {len(d['classes'])} classes"
             + (f", weighted by {d['weight']}" if d.get("weight") else ""),
             f"trained on   {fmt_count(first.get('rows'))} rows of {first.get('source', '?')}"
             + (f" ({fmt_count(first['null_label_rows'])} with a NULL label skipped)"
                if first.get("null_label_rows") else "")]
    for i, b in enumerate((trained.get("batches") or [])[1:]):  # sqlnb.update, oldest first
        decay = f", decay {b['decay']:g}" if b.get("decay") not in (None, 1) else ""
        lines.append(f"{'updated with' if i == 0 else '':<13}{fmt_count(b.get('rows'))} rows of {b.get('source', '?')}"
                     f" at {b.get('at') or '?'}{decay}")
    if len(batches) > 1:
        lines.append(f"{'in all':<13}{fmt_count(trained.get('rows'))} rows"
                     + (" (effective: older rows decayed)" if any(b.get("decay") not in (None, 1) for b in batches)
                        else ""))
    for i, s in enumerate(trained.get("screened") or []):  # sqlnb.models.screening
        lines.append(f"{'left out' if i == 0 else '':<13}{s['column']}: {s['reason']}")
    if provenance:
        v = d.get("versions") or {}
        lines.append(f"created      {d.get('created') or '?'} in {trained.get('seconds', '?')} s"
                     + (f" with sqlnb {v['sqlnb']}, duckdb {v.get('duckdb')}" if v.get("sqlnb") else ""))
    if d.get("calibration"):
        from sqlnb.models.calibration import summary
        lines.append(f"calibrated   {summary(d['calibration'])}")
    if d.get("conformal"):
        from sqlnb.models.conformal import summary as set_summary
        lines.append(f"conformal    {set_summary(d['conformal'])}")
    lines.append("parameters   " + (", ".join(f"{k}={_value(v)}" for k, v in d["hyperparameters"].items()
                                             if v not in ({}, None)) or "defaults"))
    if "l2" in d["hyperparameters"]:  # learnt weights (sqlnb.models.naive_bayes.weighted)
        tried = d["trained"].get("l2_cv")
        lines.append(f"weights      learnt with l2 = {_value(d['hyperparameters'].get('l2'))}"
                     + (", chosen by cross-validation (mean held-out log loss: "
                        + ", ".join(f"{t['l2']:g} {t['cv_log_loss']:.4f}" for t in tried) + ")" if tried
                        else ", given"))
    if d.get("skdb"):  # the selective KDB's leave-one-out choice (sqlnb.models.naive_bayes.skdb)
        lines += selection_text(d["skdb"])
    if d.get("eskdb"):  # the ensemble's members (sqlnb.models.naive_bayes.eskdb)
        lines += ensemble_text(d["eskdb"])
    if d.get("likelihood"):
        from sqlnb.models.naive_bayes.likelihood import summary_text
        lines.append(f"likelihood   {summary_text(d['likelihood'])}")
    size = d["size"]
    lines.append(f"size         {size['features']} features ("
                 + ", ".join(f"{n} {k}" for k, n in kinds.items())
                 + f"), {size['parameter_tables']} parameter tables, {fmt_count(size['parameter_rows'])} rows")
    lines.append("")
    has_rows = any("rows" in c for c in d["classes"])
    has_prior = any("prior" in c for c in d["classes"])
    # The probability column of each class, when any is not proba_<label> (labels equal
    # up to case, or too long for a 63-byte identifier); otherwise the names are plain.
    renamed = any(c.get("column", f"proba_{label_text(c['label'])}") != f"proba_{label_text(c['label'])}"
                  for c in d["classes"])
    header = (["class"] + (["column"] if renamed else []) + (["rows"] if has_rows else [])
              + (["prior"] if has_prior else []))
    rows = [[label_text(c["label"])] + ([c["column"]] if renamed else []) + ([fmt_count(c["rows"])] if has_rows else [])
            + ([f"{c['prior']:.4f}"] if has_prior else []) for c in d["classes"]]
    lines.append(format_table(header, rows, align="llrr" if renamed else "lrr"))
    lines.append("")

    lines.append(format_table(["feature", "kind", "type", ""],
                              [[f["name"], f["kind"], f["type"], feature_detail(f)] for f in d["features"]]))
    if d["top_features"]:
        lines.append("")
        lines.append("top features (per family, best first; see sqlnb.workflows.importance)")
        for kind, entries in d["top_features"].items():
            lines.append(f"  {kind}: {MEASURES[kind]}")
            rows = []
            for e in entries:
                note = ""
                if "strongest_value" in e:
                    note = f"strongest value {label_text(e['strongest_value'])!r} (favours {label_text(e['favours'])!r})"
                if e.get("rules_out"):
                    note = "a count rules out " + ", ".join(repr(label_text(c)) for c in e["rules_out"])
                rows.append([e["name"], "inf" if e["score"] is None else f"{e['score']:.3f}", note])
            lines.append(format_table(["", "", ""], rows, align="lrl", indent="    ").split("\n", 1)[1])
    return "\n".join(lines)


def _blank(value: Any) -> Any:
    """A listing's cell: a value unknown (a damaged model's) as blank."""
    return "" if value is None else value


def models_text(models: list[dict]) -> str:
    """The ``sqlnb models`` listing; with a damaged model among them, a ``status`` column
    (``ok`` or ``damaged: <what>``, :func:`sqlnb.store.list_models`)."""
    status = any(m.get("status", "ok") != "ok" for m in models)
    return format_table(["name", "kind", "label", "features", "rows", "created"] + ["status"] * status,
                        [[m["name"], m["kind"], _blank(m.get("label")), _blank(m.get("features")),
                          fmt_count(m.get("rows")), m.get("created", "")] + [m.get("status", "ok")] * status
                         for m in models],
                        align="lllrrl" + "l" * status)
