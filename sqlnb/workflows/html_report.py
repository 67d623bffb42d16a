"""One self-contained HTML page about a model on labelled data (``sqlnb report``).

The page is HTML5 that needs nothing else to be read: no script, no stylesheet, font or
image from anywhere (the CSS is inline, the four plots of :mod:`sqlnb.workflows.plots`
are inline ``<svg>`` elements, and the only links are to the page's own sections,
``href="#..."``). It holds the model's summary (:func:`~sqlnb.workflows.report.show_text`'s
facts, classes and features, as tables),
the decision rule in force, the evaluation's figures
(:class:`~sqlnb.workflows.evaluate.Evaluation`) and, for a model with conformal sets, their
coverage and size as ``evaluate`` reports them (:func:`~sqlnb.workflows.conformal.coverage`),
the confusion matrix, reliability
diagram, ROC and precision–recall curves, the features that set each class apart
(:func:`~sqlnb.workflows.importance.top_features_per_class`; a token bag's terms,
:func:`~sqlnb.models.naive_bayes.text.top_terms`) and every parameter (a tree's tables
given each parent included)
(:func:`~sqlnb.workflows.parameters.parameter_tables`). Every name that comes from the
data or the model (labels, feature names, values, the data's description) is escaped, so
a column named ``<script>`` is text.
"""

from __future__ import annotations

import os
from html import escape
from typing import Any, Mapping, Sequence

from sqlnb.engines import as_engine
from sqlnb.io import output
from sqlnb.io.locations import FileOut
from sqlnb.models.decision import DecisionRule
from sqlnb.models.finish import label_text
from sqlnb.models.naive_bayes.text import top_terms
from sqlnb.source import read_with
from sqlnb.workflows import plots
from sqlnb.workflows.curves import curve_points
from sqlnb.workflows.evaluate import evaluate
from sqlnb.workflows.importance import top_features_per_class
from sqlnb.workflows.parameters import parameter_tables, parameters
from sqlnb.workflows.report import describe, feature_detail, show_text

#: What the page says when the model has no decision rule of its own.
DEFAULT_DECISION = ("argmax (minimum error): the class of highest posterior probability, "
                    "ties to the first class in sorted order")

#: The layout: the page uses the window's width up to 110em; plots and per-class tables
#: sit in grids of as many columns as fit (one on a phone); a plot scales down with its
#: column (``svg { max-width: 100% }``) and a table wider than its column scrolls inside
#: its own box, so nothing runs past the window.
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 110em; padding: 0 1.5em; color: #222;
       line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: .3em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.8em; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: .4em 0 1em; font-size: .92em; }
th, td { border-bottom: 1px solid #e4e4e4; padding: .25em .7em; text-align: left; vertical-align: top; }
th { background: #f6f6f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: .3em 0; }
.scroll { overflow-x: auto; max-width: 100%; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(24em, 1fr)); gap: .5em 2em; align-items: start; }
.row { display: flex; flex-wrap: wrap; gap: 0 3em; align-items: flex-start; }
.row > * { min-width: 0; }
.plots { grid-template-columns: repeat(auto-fill, minmax(30em, 1fr)); }
figure { margin: 0 0 1em; min-width: 0; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .9em; color: #555; }
p.note { color: #555; font-size: .92em; }
""".strip()

#: The page's sections: (anchor, heading).
SECTIONS = (("model", "Model"), ("decision", "Decision rule"), ("metrics", "Metrics"), ("plots", "Plots"),
            ("features", "Top features per class"), ("parameters", "Parameters"))

CAPTIONS = {
    "confusion_matrix": "Rows: true label; columns: prediction; shade: share of the row.",
    "reliability": "Per bin of the predicted class's probability: the share of correct predictions "
                   "against the mean probability (the diagonal is perfect calibration).",
    "roc": "One class against the rest, ranked by the class's log-odds; the diagonal is chance.",
    "precision_recall": "One class against the rest, ranked by the class's log-odds.",
}


def _cell(v: Any, digits: int = 4) -> str:
    if v is None:
        return '<td class="num">n/a</td>'
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"<td>{escape(str(v))}</td>"
    text = f"{v:,}" if isinstance(v, int) else f"{v:.{digits}f}"
    return f'<td class="num">{text}</td>'


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str | None = None,
               numeric_text: bool = False) -> str:
    """A ``<table>``; every cell escaped. ``numeric_text``: cells are text already formatted,
    right-aligned past the first columns that hold words."""
    out = ['<div class="scroll"><table>']
    if caption:
        out.append(f"<caption>{escape(caption)}</caption>")
    if header:
        out.append("<thead><tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in header) + "</tr></thead>")
    out.append("<tbody>")
    for r in rows:
        if numeric_text:
            cells = "".join(f'<td class="num">{escape(c)}</td>' if _numberlike(c) else f"<td>{escape(c)}</td>"
                            for c in r)
        else:
            cells = "".join(_cell(c) for c in r)
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _numberlike(text: str) -> bool:
    try:
        float(text.replace(",", ""))
        return True
    except ValueError:
        return text == "n/a"


def _decision(model) -> str:
    rule = getattr(model, "decision", None)
    if rule is None:
        return DEFAULT_DECISION
    describe_rule = getattr(rule, "describe", None)
    return str(describe_rule() if callable(describe_rule) else rule)


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _model(model) -> str:
    """The summary of ``sqlnb show`` as tables: the facts (the lines of its first block,
    in its own words), the classes, and the features."""
    d = describe(model)
    facts = []
    for line in show_text(d).split("\n\n", 1)[0].splitlines():
        key, value = line[:13].strip(), line[13:].strip()
        facts.append([key, value])
    out = [html_table([], facts)]
    classes = [[label_text(c["label"]), c.get("rows"), c.get("prior")] for c in d["classes"]]
    out.append('<div class="row">')
    out.append(html_table(["class", "training rows", "prior"], classes, caption=_count(len(classes), "class", "classes")))
    out.append(html_table(["feature", "kind", "type", "detail"],
                          [[f["name"], f["kind"], f["type"], feature_detail(f)] for f in d["features"]],
                          caption=_count(len(d["features"]), "feature", "features")))
    out.append("</div>")
    return "\n".join(out)


def _metrics(ev) -> str:
    figures = [("rows", ev.rows), ("labelled rows", ev.labelled_rows), ("accuracy", ev.accuracy),
               ("log loss", ev.log_loss), ("Brier", ev.brier), ("macro F1", ev.macro_f1),
               ("weighted F1", ev.weighted_f1)]
    if ev.roc_auc is not None:
        figures.append((f"ROC AUC (positive class {label_text(ev.positive_class)})", ev.roc_auc))
    for name, value in (("macro ROC AUC (one against the rest)", ev.macro_roc_auc),
                        ("macro average precision", ev.macro_average_precision),
                        ("expected calibration error (ECE)", ev.ece)):
        if value is not None:
            figures.append((name, value))
    for name, value in (("unlabelled rows (skipped)", ev.unlabelled_rows),
                        ("rows without probabilities", ev.no_proba_rows),
                        ("rows whose label is not a class", ev.unknown_label_rows)):
        if value:
            figures.append((name, value))
    if ev.decision is not None:  # under a rule: what `evaluate` prints of it
        d = ev.decision
        figures.append(("expected cost per accepted row (mean of L(label, prediction))", d.expected_cost))
        if DecisionRule.from_dict(d.rule, d.rule["classes"]).reject is not None:
            figures += [("rejected rows", d.rejected_rows), ("rejection rate", d.rejection_rate),
                        ("accepted rows", d.accepted_rows), ("accuracy on the accepted rows", d.accepted_accuracy)]
    summary = html_table(["figure", "value"], figures)
    per_class = html_table(
        ["class", "precision", "recall", "F1", "support", "predicted", "ROC AUC", "average precision"],
        [[label_text(m.label), m.precision, m.recall, m.f1, m.support, m.predicted,
          m.roc_auc, m.average_precision] for m in ev.per_class],
        caption="per class (one against the rest for ROC AUC and average precision)")
    return summary + "\n" + per_class


def _sets(cov: Mapping[str, Any]) -> str:
    """The conformal sets' figures of ``evaluate`` (:func:`~sqlnb.workflows.conformal.coverage`):
    coverage and mean set size overall and per class, and coverage by set size."""
    target = 1 - cov["alpha"]
    figures = [("method", cov["method"]), ("alpha", f"{cov['alpha']:g}"), ("target coverage (at least)", f"{target:g}"),
               ("coverage", cov["coverage"]), ("mean set size", cov["mean_set_size"]), ("rows with a set", cov["rows"])]
    if cov["no_set_rows"]:
        figures.append(("rows without probabilities (no set)", cov["no_set_rows"]))
    out = ['<h3 id="conformal">Conformal prediction sets</h3>',
           "<p>The share of rows whose prediction set holds their label (the coverage: at least the target on "
           "average over held-out draws) and the sets' size, as <code>sqlnb evaluate</code> reports them.</p>",
           '<div class="row">', html_table(["figure", "value"], figures, caption="overall"),
           html_table(["class", "rows", "coverage", "mean set size"],
                      [[k, v["rows"], v["coverage"], v["mean_set_size"]] for k, v in cov["per_class"].items()],
                      caption="per class (true label)"),
           html_table(["set size", "rows", "coverage"],
                      [[k, v["rows"], v["coverage"]] for k, v in cov["by_set_size"].items()], caption="by set size"),
           "</div>"]
    return "\n".join(out)


#: Per-class scores at or below this (nats, or the family's units) are not listed as top
#: features: a feature whose distribution is the same in the class as overall scores 0,
#: and float rounding leaves it at ±1e-16 or so, which would print as a "top" 0.0000.
SCORE_FLOOR = 1e-9


def _score(v: float | None) -> str:
    return "inf" if v is None else f"{v:.4g}"


def _features(model, per_class: Mapping[Any, list[dict]], top: int) -> str:
    out = []
    if any(per_class.values()):  # a model of token bags only has none: its terms follow
        out.append("<p>Per class, the features whose distribution in the class differs most from the "
                   "whole (see <code>sqlnb.workflows.importance</code> for the measures); a feature that "
                   "is distributed in the class as overall is not listed.</p>")
        out.append('<div class="grid">')
        for cls, entries in per_class.items():
            kept = [e for e in entries if e["score"] is None or e["score"] > SCORE_FLOOR]
            rows = [[e["name"], e["kind"], _score(e["score"]), label_text(e["detail"])] for e in kept]
            out.append(html_table(["feature", "kind", "score", "most typical of the class"], rows,
                                  caption=f"class {label_text(cls)}", numeric_text=True) if rows else
                       f"<p><b>class {escape(label_text(cls))}</b>: no feature is distributed in it otherwise "
                       "than overall.</p>")
        out.append("</div>")
    out += _terms(model, top)
    return "\n".join(out) if out else "<p>This model kind has no per-feature terms to rank.</p>"


def _terms(model, top: int) -> list[str]:
    """Token bags: per class, the terms that most indicate it (``sqlnb show --top-terms``:
    the class's part of the term's mutual information with the class)."""
    bags = [f for f in getattr(model, "features", []) if getattr(f, "bag", None) is not None]
    if not bags:
        return []
    out = []
    for f in bags:
        t = top_terms(model, f.name, n=max(top, 10)).to_pylist()
        out.append(f"<p>Token bag <b>{escape(f.name)}</b> ({escape(f.kind)}): per class, the terms whose "
                   "share of the class's documents most exceeds their share overall, ranked by the class's "
                   "part of the term's mutual information with the class.</p>")
        out.append('<div class="grid">')
        for cls in model.classes:
            rows = [[r["term"], f"{r['mi_part']:.4g}", f"{r['doc_share']:.3f}", f"{r['overall_share']:.3f}"]
                    for r in t if r["class"] == cls]
            out.append(html_table(["term", "information (nats)", "share of the class's documents", "overall"],
                                  rows, caption=f"{f.name}: class {label_text(cls)}", numeric_text=True) if rows
                       else f"<p><b>{escape(f.name)}: class {escape(label_text(cls))}</b>: no term is more "
                            "common in it than overall.</p>")
        out.append("</div>")
    return out


def _parameters(model) -> str:
    out = []
    for title, header, rows, _ in parameter_tables(parameters(model)):
        out.append(html_table(header, rows, caption=title, numeric_text=True) if header
                   else f"<p>{escape(title)}</p>")
    return "\n".join(out)


def render(model, evaluation, points: Mapping[str, Any], data: str, top: int = 5, title: str | None = None,
           sets: Mapping[str, Any] | None = None) -> str:
    """The report page (module docstring).

    Parameters
    ----------
    model : Model
        Any sqlnb model.
    evaluation : Evaluation
        :func:`~sqlnb.workflows.evaluate.evaluate` of ``model`` on the data.
    points : dict
        :func:`~sqlnb.workflows.curves.curve_points` of ``model`` on the same data.
    data : str
        What the data is, as the page names it (e.g. ``test.parquet``).
    top : int
        Features listed per class.
    title : str, optional
        The page's title (default: ``sqlnb report: <model name> on <data>``).
    sets : dict, optional
        :func:`~sqlnb.workflows.conformal.coverage` of the model's conformal sets on the same
        data: shown in the metrics section.
    """
    name = getattr(model, "name", None) or "(unsaved)"
    title = title or f"sqlnb report: {name} on {data}"
    figures = plots.evaluation_plots(evaluation, points)
    body = {
        "model": _model(model),
        "decision": f"<p>{escape(_decision(model))}</p>",
        "metrics": _metrics(evaluation) + ("\n" + _sets(sets) if sets else ""),
        "plots": '<div class="grid plots">\n' + "\n".join(
            f'<figure id="plot-{stem}">\n{svg}<figcaption>{escape(CAPTIONS[stem])}</figcaption>\n</figure>'
            for stem, svg in figures.items()) + "\n</div>",
        "features": _features(model, top_features_per_class(model, top), top),
        "parameters": _parameters(model),
    }
    head = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>\n"
            f"<h1>{escape(title)}</h1>\n"
            f"<p>{escape(model.kind)} model of <b>{escape(str(model.label))}</b>, evaluated on "
            f"{evaluation.rows:,} rows of {escape(data)}.</p>\n"
            "<nav>" + "".join(f'<a href="#{a}">{escape(h)}</a>' for a, h in SECTIONS) + "</nav>\n")
    sections = "\n".join(f'<section id="{a}">\n<h2>{escape(h)}</h2>\n{body[a]}\n</section>' for a, h in SECTIONS)
    return head + sections + "\n</body>\n</html>\n"


def report(model, data: Any, out: str | os.PathLike | None = None, con: Any = None, label: str | None = None,
           labels: str = "present", top: int = 5, title: str | None = None, replace: bool = False) -> str:
    """The page ``sqlnb report`` writes, from Python: ``model`` evaluated on labelled
    ``data``, its curves, features and parameters, as one self-contained HTML page.

    The figures are computed where the data is (two statements: the metrics of
    :func:`~sqlnb.workflows.evaluate.evaluate`, then the curve points of
    :func:`~sqlnb.workflows.curves.curve_points`); no scored row reaches Python.

    Parameters
    ----------
    model : Model
        Any sqlnb model (``sqlnb.load(...)``, ``sqlnb.fit(...)``, an estimator's ``model_``).
    data : str, Table, Query, Files, relation or Arrow table
        The labelled rows, as :func:`~sqlnb.workflows.evaluate.evaluate` takes them.
    out : str or path, optional
        Write the page there, all or nothing (a temporary file moved into place); an
        existing file is replaced only with ``replace=True``.
    con : duckdb connection or engine, optional
        Where ``data`` is read and scored (default: a new in-memory DuckDB).
    label : str, optional
        The label column in ``data`` (default: the model's).
    labels : {"present", "model"}
        The labels the metric averages are over (as for ``evaluate``).
    top : int
        Features listed per class.
    title : str, optional
        The page's title (default: ``sqlnb report: <model name> on <data>``).

    Returns
    -------
    str
        The HTML page.

    Examples
    --------
    >>> page = sqlnb.report(model, "test.parquet", out="report.html")   # doctest: +SKIP
    """
    target = None
    if out is not None:
        target = FileOut(os.fspath(out), "html")
        output.check_target(target, replace)  # before any work, as the command line
    engine = as_engine(con, data)
    source = engine.resolve(read_with(data, model.read_types()))
    evaluation = evaluate(model, source, engine, label, labels)
    points = curve_points(model, source, engine, label, max_points=plots.CURVE_POINTS)
    page = render(model, evaluation, points, source.description, top=top, title=title)
    if target is not None:
        with output.atomic_path(target.path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
    return page
