"""The evaluation's pictures as SVG text: confusion matrix, reliability diagram, ROC and
precision–recall curves (``sqlnb evaluate --plots DIR``, ``sqlnb report``).

Each function takes plain data -- the confusion counts of
:class:`~sqlnb.workflows.evaluate.Evaluation`, the curves and reliability table of
:func:`~sqlnb.workflows.curves.curve_points`, all aggregated in SQL -- and returns one
standalone ``<svg>`` element: valid XML, every label escaped, with a ``<title>`` naming
the plot (read by screen readers and shown as a tooltip) and ``data-plot`` naming its kind.
They are written by hand rather than with a plotting library: four plots on the unit
square (the confusion matrix a grid of cells) need axes, ticks, lines and labels only,
and sqlnb stays a lean SQL tool whose start-up imports nothing heavy (matplotlib would be
a ~40 MB dependency taking ~0.5 s to import, for output that is SVG either way).
"""

from __future__ import annotations

import os
from html import escape
from typing import Any, Mapping, Sequence

from sqlnb.models.finish import label_text

#: Line colours, one per class in class order (Tableau 10), repeated past ten classes.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
#: The plots, by file name stem: their titles (``<title>`` and the heading drawn).
TITLES = {
    "confusion_matrix": "Confusion matrix",
    "reliability": "Reliability diagram",
    "roc": "ROC curves",
    "precision_recall": "Precision-recall curves",
}
#: Most thresholds kept per class for the curves (:func:`~sqlnb.workflows.curves.curve_points`'
#: ``max_points``): beyond a few hundred points a curve looks the same and the SVG only grows.
CURVE_POINTS = 400
#: Plot area of the unit-square plots: left, top, side (pixels); the legend goes right of it.
LEFT, TOP, SIDE = 60, 40, 320


def _text(x: float, y: float, s: Any, anchor: str = "middle", **attrs: Any) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(str(v))}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(str(s))}</text>'


def _open(kind: str, width: int, height: int, caption: str | None = None) -> list[str]:
    title = TITLES[kind] + (f": {caption}" if caption else "")
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" role="img" '
            f'data-plot="{kind}">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{width}" height="{height}" fill="white"/>',
            _text(width / 2, 22, title, font_size=15)]


def _close(parts: list[str]) -> str:
    return "\n".join(parts + ["</svg>"]) + "\n"


def _X(v: float) -> float:
    return LEFT + v * SIDE


def _Y(v: float) -> float:
    return TOP + (1.0 - v) * SIDE


def _unit_axes(xlabel: str, ylabel: str, diagonal: str | None = None) -> list[str]:
    """The unit square: grid and ticks every 0.2, axis labels, and a dashed reference line
    (``"up"``: y = x, ``"down"``: y = 1 − x) when asked."""
    out = []
    for i in range(6):
        v = i / 5
        out.append(f'<line x1="{_X(0):.1f}" y1="{_Y(v):.1f}" x2="{_X(1):.1f}" y2="{_Y(v):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<line x1="{_X(v):.1f}" y1="{_Y(0):.1f}" x2="{_X(v):.1f}" y2="{_Y(1):.1f}" stroke="#e4e4e4"/>')
        out.append(_text(LEFT - 6, _Y(v) + 4, f"{v:.1f}", anchor="end"))
        out.append(_text(_X(v), TOP + SIDE + 16, f"{v:.1f}"))
    if diagonal:
        y0, y1 = (0, 1) if diagonal == "up" else (1, 0)
        out.append(f'<line x1="{_X(0):.1f}" y1="{_Y(y0):.1f}" x2="{_X(1):.1f}" y2="{_Y(y1):.1f}" '
                   'stroke="#999" stroke-dasharray="4 4"/>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{SIDE}" height="{SIDE}" fill="none" stroke="#333"/>')
    out.append(_text(LEFT + SIDE / 2, TOP + SIDE + 36, xlabel))
    out.append(f'<text transform="translate(16 {TOP + SIDE / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f"{escape(ylabel)}</text>")
    return out


def _polyline(xs: Sequence[float], ys: Sequence[float], colour: str, step: bool = False) -> str:
    pts = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        if step and i:  # a step: along x at the previous y, then up to the new y
            pts.append(f"{_X(x):.1f},{_Y(ys[i - 1]):.1f}")
        pts.append(f"{_X(x):.1f},{_Y(y):.1f}")
    return f'<polyline points="{" ".join(pts)}" fill="none" stroke="{colour}" stroke-width="2"/>'


def _legend(entries: Sequence[tuple[str, str]]) -> list[str]:
    out = []
    x = LEFT + SIDE + 16
    for i, (text, colour) in enumerate(entries):
        y = TOP + 12 + 18 * i
        out.append(f'<line x1="{x}" y1="{y}" x2="{x + 22}" y2="{y}" stroke="{colour}" stroke-width="2"/>')
        out.append(_text(x + 28, y + 4, text, anchor="start"))
    return out


def _size(entries: int) -> tuple[int, int]:
    return LEFT + SIDE + 220, max(TOP + SIDE + 50, TOP + 24 + 18 * entries)


def _curves(kind: str, curves: Mapping[Any, Mapping[str, Sequence[float]]], x: str, y: str,
            xlabel: str, ylabel: str, classes: Sequence[Any] | None, notes: Mapping[Any, str],
            diagonal: str | None, caption: str | None, step: bool) -> str:
    order = list(classes) if classes is not None else list(curves)
    entries, lines = [], []
    for i, cls in enumerate(order):
        colour = PALETTE[i % len(PALETTE)]
        if cls not in curves:
            continue
        c = curves[cls]
        lines.append(_polyline(c[x], c[y], colour, step))
        entries.append((label_text(cls) + (f" ({notes[cls]})" if cls in notes else ""), colour))
    width, height = _size(len(entries))
    parts = _open(kind, width, height, caption) + _unit_axes(xlabel, ylabel, diagonal) + lines + _legend(entries)
    if not entries:
        parts.append(_text(LEFT + SIDE / 2, TOP + SIDE / 2, "no class has both positive and negative rows"))
    return _close(parts)


def roc_svg(roc: Mapping[Any, Mapping[str, Sequence[float]]], classes: Sequence[Any] | None = None,
            auc: Mapping[Any, float] | None = None, caption: str | None = None) -> str:
    """One-vs-rest ROC curve per class (``{class: {"fpr": [...], "tpr": [...]}}``), with the
    chance diagonal; ``auc`` (per class) goes into the legend."""
    notes = {c: f"AUC {a:.3f}" for c, a in (auc or {}).items() if a is not None}
    return _curves("roc", roc, "fpr", "tpr", "false positive rate", "true positive rate", classes, notes,
                   "up", caption, step=False)


def precision_recall_svg(pr: Mapping[Any, Mapping[str, Sequence[float]]], classes: Sequence[Any] | None = None,
                         average_precision: Mapping[Any, float] | None = None, caption: str | None = None) -> str:
    """One-vs-rest precision–recall curve per class (``{class: {"precision": [...],
    "recall": [...]}}``), drawn as scikit-learn's points joined by straight lines."""
    notes = {c: f"AP {a:.3f}" for c, a in (average_precision or {}).items() if a is not None}
    return _curves("precision_recall", pr, "recall", "precision", "recall", "precision", classes, notes,
                   None, caption, step=False)


def reliability_svg(table: Sequence[Mapping[str, Any]], ece: float | None = None, caption: str | None = None) -> str:
    """The reliability diagram: per bin of the predicted class's probability, the share of
    correct predictions (bars, spanning the bin) against the perfect calibration diagonal,
    the bin's mean confidence marked on the bar; empty bins are left blank. ``table`` is
    :func:`~sqlnb.workflows.curves.curve_points`' ``"reliability"``."""
    width, height = _size(3)
    parts = _open("reliability", width, height, caption) + _unit_axes("predicted probability (confidence)",
                                                                       "accuracy", "up")
    most = max((int(b["rows"]) for b in table), default=0) or 1
    for b in table:
        if not b["rows"] or b["accuracy"] is None:
            continue
        x0, x1 = _X(b["lower"]) + 1, _X(b["upper"]) - 1
        parts.append(f'<rect x="{x0:.1f}" y="{_Y(b["accuracy"]):.1f}" width="{max(x1 - x0, 0.5):.1f}" '
                     f'height="{_Y(0) - _Y(b["accuracy"]):.1f}" fill="{PALETTE[0]}" fill-opacity="0.75">'
                     f'<title>{escape(_bin_tip(b))}</title></rect>')
        cy = _Y(b["confidence"])
        parts.append(f'<line x1="{x0:.1f}" y1="{cy:.1f}" x2="{x1:.1f}" y2="{cy:.1f}" stroke="{PALETTE[2]}" '
                     'stroke-width="2"/>')
        # how many rows the bin holds, as a low bar along the bottom (the fullest bin 40 px)
        h = 40 * b["rows"] / most
        parts.append(f'<rect x="{x0:.1f}" y="{_Y(0) - h:.1f}" width="{max(x1 - x0, 0.5):.1f}" height="{h:.1f}" '
                     'fill="#333" fill-opacity="0.35"/>')
    if any(b["rows"] for b in table):
        # the count bars' scale: a bracket 40 px tall right of the plot, labelled with the
        # fullest bin's rows (the bars share the accuracy axis, whose units they are not in)
        xs = _X(1) + 6
        for x1, y1, x2, y2 in ((xs - 3, _Y(0), xs, _Y(0)), (xs, _Y(0), xs, _Y(0) - 40),
                               (xs - 3, _Y(0) - 40, xs, _Y(0) - 40)):
            parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#333" '
                         'stroke-opacity="0.6"/>')
        parts.append(_text(xs + 3, _Y(0) - 16, f"{most:,}", anchor="start"))
        parts.append(_text(xs + 3, _Y(0) - 3, "rows", anchor="start"))
    legend = [("accuracy in the bin", PALETTE[0]), ("mean confidence in the bin", PALETTE[2]),
              ("rows in the bin (bottom)", "#777")]
    parts += _legend(legend)
    if ece is not None:
        parts.append(_text(LEFT + SIDE + 16, TOP + 12 + 18 * len(legend) + 8, f"ECE {ece:.4f}", anchor="start"))
    return _close(parts)


def _bin_tip(b: Mapping[str, Any]) -> str:
    return (f"[{b['lower']:.3f}, {b['upper']:.3f}): {b['rows']:,} rows, confidence {b['confidence']:.3f}, "
            f"accuracy {b['accuracy']:.3f}")


def confusion_matrix_svg(true: Sequence[Any], predicted: Sequence[Any], counts: Sequence[Sequence[int]],
                         caption: str | None = None) -> str:
    """The confusion matrix (rows: true label, columns: prediction; a ``None`` prediction
    is a row the model gave no probabilities) with counts in the cells, shaded by the
    share of their row (the recall of the diagonal cells)."""
    cell = max(24, min(64, 480 // max(len(true), len(predicted), 1)))
    names_t = [label_text(t) for t in true]
    names_p = ["(none)" if p is None else label_text(p) for p in predicted]
    margin = 12 + 7 * min(24, max(len(n) for n in names_t + names_p + [""]))  # room for the labels
    left, top = margin + 40, margin + 50
    width = left + cell * len(predicted) + 20
    height = top + cell * len(true) + 20
    parts = _open("confusion_matrix", max(width, 320), height, caption)
    for i, row in enumerate(counts):
        n = sum(row) or 1
        for j, v in enumerate(row):
            share = v / n
            x, y = left + j * cell, top + i * cell
            fill = f"rgba(78, 121, 167, {0.08 + 0.92 * share:.3f})" if v else "#fafafa"
            tip = f"true {names_t[i]}, predicted {names_p[j]}: {v:,} ({share:.1%} of the row)"
            parts.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" stroke="#ccc">'
                         f"<title>{escape(tip)}</title></rect>")
            parts.append(_text(x + cell / 2, y + cell / 2 + 4, f"{v:,}", fill="white" if share > 0.6 else "#222"))
    for i, name in enumerate(names_t):
        parts.append(_text(left - 6, top + i * cell + cell / 2 + 4, _cut(name), anchor="end"))
    for j, name in enumerate(names_p):
        x, y = left + j * cell + cell / 2 + 4, top - 6
        parts.append(f'<text transform="translate({x:.1f} {y:.1f}) rotate(-60)">{escape(_cut(name))}</text>')
    parts.append(_text(left + cell * len(predicted) / 2, 44, "prediction"))
    parts.append(f'<text transform="translate(16 {top + cell * len(true) / 2:.1f}) rotate(-90)" '
                 'text-anchor="middle">true label</text>')
    return _close(parts)


def plot_files(directory: str) -> dict[str, str]:
    """Where :func:`evaluation_plots` are written in ``directory``: ``<stem>.svg`` each."""
    return {stem: os.path.join(directory, f"{stem}.svg") for stem in TITLES}


def _cut(name: str, most: int = 24) -> str:
    return name if len(name) <= most else name[:most - 1] + "…"


def evaluation_plots(evaluation, points: Mapping[str, Any], caption: str | None = None) -> dict[str, str]:
    """The four plots of an evaluation, by file name stem (:data:`TITLES`): the confusion
    matrix of ``evaluation`` (an :class:`~sqlnb.workflows.evaluate.Evaluation`) and the
    curves and reliability table of ``points`` (:func:`~sqlnb.workflows.curves.curve_points`)."""
    per_class_auc = {m.label: m.roc_auc for m in evaluation.per_class}
    per_class_ap = {m.label: m.average_precision for m in evaluation.per_class}
    classes = points.get("classes", evaluation.classes)
    return {
        "confusion_matrix": confusion_matrix_svg(evaluation.confusion_true, evaluation.confusion_predicted,
                                                 evaluation.confusion, caption),
        "reliability": reliability_svg(points["reliability"], evaluation.ece, caption),
        "roc": roc_svg(points["roc"], classes, per_class_auc, caption),
        "precision_recall": precision_recall_svg(points["pr"], classes, per_class_ap, caption),
    }
