"""One self-contained HTML page about a model on labelled data (``sqlnb report``).

The page is HTML5 that needs nothing else to be read: no script, no stylesheet, font or
image from anywhere (the CSS is inline, the four plots of :mod:`sqlnb.workflows.plots`
are inline ``<svg>`` elements, and the only links are to the page's own sections,
``href="#..."``). It holds the model's summary (:func:`~sqlnb.workflows.report.show_text`),
the decision rule in force, the evaluation's figures
(:class:`~sqlnb.workflows.evaluate.Evaluation`), the confusion matrix, reliability
diagram, ROC and precision–recall curves, the features that set each class apart
(:func:`~sqlnb.workflows.importance.top_features_per_class`) and every parameter
(:func:`~sqlnb.workflows.parameters.parameter_tables`). Every name that comes from the
data or the model (labels, feature names, values, the data's description) is escaped, so
a column named ``<script>`` is text.
"""

from __future__ import annotations

from html import escape
from typing import Any, Mapping, Sequence

from sqlnb.models.finish import label_text
from sqlnb.workflows import plots
from sqlnb.workflows.importance import top_features_per_class
from sqlnb.workflows.parameters import parameter_tables, parameters
from sqlnb.workflows.report import describe, show_text

#: What the page says when the model has no decision rule of its own.
DEFAULT_DECISION = ("argmax (minimum error): the class of highest posterior probability, "
                    "ties to the first class in sorted order")

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
nav a { margin-right: 1em; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .9em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: .92em; }
th, td { border-bottom: 1px solid #e4e4e4; padding: .25em .7em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: .3em 0; }
figure { display: inline-block; margin: 0 1.5em 1.5em 0; vertical-align: top; }
figcaption { font-size: .9em; color: #555; max-width: 36em; }
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
    out = ["<table>"]
    if caption:
        out.append(f"<caption>{escape(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in header) + "</tr></thead><tbody>")
    for r in rows:
        if numeric_text:
            cells = "".join(f'<td class="num">{escape(c)}</td>' if _numberlike(c) else f"<td>{escape(c)}</td>"
                            for c in r)
        else:
            cells = "".join(_cell(c) for c in r)
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table>")
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
    summary = html_table(["figure", "value"], figures)
    per_class = html_table(
        ["class", "precision", "recall", "F1", "support", "predicted", "ROC AUC", "average precision"],
        [[label_text(m.label), m.precision, m.recall, m.f1, m.support, m.predicted,
          m.roc_auc, m.average_precision] for m in ev.per_class],
        caption="per class (one against the rest for ROC AUC and average precision)")
    return summary + "\n" + per_class


def _features(per_class: Mapping[Any, list[dict]]) -> str:
    if not per_class:
        return "<p>This model kind has no per-feature terms to rank.</p>"
    out = ["<p>Per class, the features whose distribution in the class differs most from the "
           "whole (see <code>sqlnb.workflows.importance</code> for the measures).</p>"]
    for cls, entries in per_class.items():
        out.append(html_table(["feature", "kind", "score", "most typical of the class"],
                              [[e["name"], e["kind"], e["score"], e["detail"]] for e in entries],
                              caption=f"class {label_text(cls)}"))
    return "\n".join(out)


def _parameters(model) -> str:
    out = []
    for title, header, rows, _ in parameter_tables(parameters(model)):
        out.append(html_table(header, rows, caption=title, numeric_text=True) if header
                   else f"<p>{escape(title)}</p>")
    return "\n".join(out)


def render(model, evaluation, points: Mapping[str, Any], data: str, top: int = 5, title: str | None = None) -> str:
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
    """
    name = getattr(model, "name", None) or "(unsaved)"
    title = title or f"sqlnb report: {name} on {data}"
    figures = plots.evaluation_plots(evaluation, points)
    body = {
        "model": f"<pre>{escape(show_text(describe(model)))}</pre>",
        "decision": f"<p>{escape(_decision(model))}</p>",
        "metrics": _metrics(evaluation),
        "plots": "\n".join(f'<figure id="plot-{stem}">\n{svg}<figcaption>{escape(CAPTIONS[stem])}</figcaption>\n'
                           "</figure>" for stem, svg in figures.items()),
        "features": _features(top_features_per_class(model, top)),
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
