"""Descriptions of models for people and for scripts (``sqlnb show``, ``sqlnb models``).

:func:`describe` turns a model into plain data (JSON-ready); :func:`show_text` and
:func:`models_text` lay that data out as aligned text. Top features rank each naive
Bayes feature by how much its term moves between classes, per family, because the
families' scores are not on one scale:

* categorical: the expected spread ``Σ_v p(v) · (max_c − min_c) ln p(v | c)`` over the
  feature's training values ``v`` (``p(v)`` their overall frequency), in nats; the value
  contributing most to it is named, with the class it favours;
* bernoulli: the same over the two outcomes, present and absent;
* multinomial / complement: the spread of the per-count weight ``max_c w_c − min_c w_c``;
* gaussian: the spread of the class means in within-class standard deviations,
  ``(max_c μ_c − min_c μ_c) / sqrt(Σ_c π_c σ²_c)``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from sqlnb.models.finish import class_columns, label_text

MEASURES = {
    "categorical": "expected spread of ln p(value | class) across classes, nats",
    "bernoulli": "expected spread of ln p(present/absent | class) across classes, nats",
    "multinomial": "spread of ln p(feature | class) per count across classes, nats",
    "complement": "spread of the complement weight per count across classes",
    "gaussian": "spread of class means in within-class standard deviations",
}


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


def _spread(a: np.ndarray) -> np.ndarray:
    """max − min over classes (axis 0), ignoring −inf entries (impossible values)."""
    a = np.where(np.isfinite(a), a, np.nan)
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(np.nanmax(a, axis=0) - np.nanmin(a, axis=0))


def top_features(model, n: int = 5) -> dict[str, list[dict]]:
    """Per family, the ``n`` naive Bayes features whose terms differ most between classes
    (see the module docstring); empty for other model kinds."""
    if not hasattr(model, "log_parameters"):
        return {}
    params = model.log_parameters()
    stats = model.stats
    prior = np.exp(params["prior"])
    ranked: dict[str, list[dict]] = {}
    for f in model.features:
        if getattr(f, "bag", None) is not None:
            continue  # token bags: see sqlnb.models.naive_bayes.text.top_terms (sqlnb show --top-terms)
        p = params[f.name]
        entry: dict[str, Any] = {"name": f.name}
        if f.kind == "categorical":
            values, flp, _ = p
            counts = stats.features[f.name].counts.sum(axis=0)
            freq = counts / counts.sum() if counts.sum() > 0 else counts
            spread = _spread(flp)
            entry["score"] = float(np.dot(freq, spread))
            if len(values):
                j = int(np.argmax(freq * spread))  # the value contributing most to the score
                entry["strongest_value"] = values[j]
                entry["favours"] = model.classes[int(np.argmax(np.where(np.isfinite(flp[:, j]), flp[:, j], -np.inf)))]
        elif f.kind == "bernoulli":
            flp, neg = p
            s = stats.features[f.name]
            present = float(s.total.sum() / s.n.sum()) if s.n.sum() > 0 else 0.0
            entry["score"] = float(present * _spread(flp) + (1 - present) * _spread(neg))
        elif f.kind == "gaussian":
            mean, var = p
            within = float(np.dot(prior, var)) if np.all(np.isfinite(prior)) else float(np.mean(var))
            entry["score"] = float((mean.max() - mean.min()) / math.sqrt(within)) if within > 0 else 0.0
        else:  # multinomial, complement: one weight per class
            entry["score"] = float(_spread(np.asarray(p, dtype=float)))
        ranked.setdefault(f.kind, []).append(entry)
    return {k: sorted(v, key=lambda e: -e["score"])[:n] for k, v in ranked.items()}


def _features(model) -> list[dict]:
    """Name, kind, SQL type (and family details) of every feature, any model kind."""
    feats = getattr(model, "features", None)
    if isinstance(feats, dict):  # dense models (LDA, QDA, logistic): name -> SQL type
        return [{"name": k, "kind": "numeric", "type": t} for k, t in feats.items()]
    out = []
    stats = getattr(model, "stats", None)
    for f in feats or []:
        d = {"name": f.name, "kind": f.kind, "type": f.sql_type}
        if f.kind == "bernoulli":
            d["threshold"] = f.threshold
        if f.kind == "categorical" and stats is not None:
            d["values"] = len(stats.features[f.name].values)
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
    if "hyperparameters" in meta:
        return dict(meta["hyperparameters"])
    skip = {"label", "label_type", "features", "report", "weight", "kind", "classes"}
    return {k: v for k, v in meta.items() if k not in skip}


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
        "trained": dict(model.report),
        "calibration": model.calibration.describe() if getattr(model, "calibration", None) else None,
        "created": getattr(model, "created", None),
        "versions": getattr(model, "versions", None) or {},
    }


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    return str(v)


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
    lines.append("parameters   " + (", ".join(f"{k}={_value(v)}" for k, v in d["hyperparameters"].items()
                                             if v not in ({}, None)) or "defaults"))
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

    def detail(f: dict) -> str:
        if "values" in f:
            return f"{f['values']} values"
        if "threshold" in f:
            return f"present when > {_value(f['threshold'])}"
        return ""

    lines.append(format_table(["feature", "kind", "type", ""],
                              [[f["name"], f["kind"], f["type"], detail(f)] for f in d["features"]]))
    if d["top_features"]:
        lines.append("")
        lines.append("top features")
        for kind, entries in d["top_features"].items():
            lines.append(f"  {kind}: {MEASURES[kind]}")
            rows = []
            for e in entries:
                note = ""
                if "strongest_value" in e:
                    note = f"strongest value {label_text(e['strongest_value'])!r} (favours {label_text(e['favours'])!r})"
                rows.append([e["name"], f"{e['score']:.3f}", note])
            lines.append(format_table(["", "", ""], rows, align="lrl", indent="    ").split("\n", 1)[1])
    return "\n".join(lines)


def models_text(models: list[dict]) -> str:
    """The ``sqlnb models`` listing."""
    return format_table(["name", "kind", "label", "features", "rows", "created"],
                        [[m["name"], m["kind"], m.get("label", ""), m.get("features", ""),
                          fmt_count(m.get("rows")), m.get("created", "")] for m in models],
                        align="lllrrl")
