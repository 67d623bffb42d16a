"""Pictures: ``sqlnb evaluate --plots DIR`` and ``sqlnb report``.

What is checked: ``report.html`` parses as HTML5 with no external reference (every
``src``/``href`` is ``data:`` or ``#``) and holds the four plots. html5lib is not in the
environment (and installing it is not this change's to make), so the page is read with
Python's own ``html.parser`` plus the strict checks HTML5 parsing would not make for us
either way: the document starts with ``<!DOCTYPE html>``, ``html`` holds one ``head``
(with a ``title`` and ``meta charset``) and one ``body``, and every element is closed in
order (stricter than HTML5, which lets some end tags be omitted; void elements excepted).
Each SVG is also parsed as XML (``xml.etree``), as a standalone .svg file must be.
"""

from __future__ import annotations

import json
import math
import os
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.integrate import quad
from scipy.stats import norm

import sqlnb
from sqlnb.models.decision import DecisionRule
from sqlnb.workflows import plots
from sqlnb.workflows.curves import curve_points
from sqlnb.workflows.evaluate import evaluate
from sqlnb.workflows.html_report import DEFAULT_DECISION, render
from sqlnb.workflows.importance import _gaussian_divergence, top_features, top_features_per_class
from support.cli import assert_error, fitted_dir, invoke, mixed_table, snapshot, write_parquet
from support.engines import postgres_engine, run_sqlnb

SVG = "{http://www.w3.org/2000/svg}"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
#: Names that must stay text: markup, a quote that would end an attribute, SQL.
NASTY_FEATURE = 'a"; DROP TABLE t; --'
SCRIPT_FEATURE = "<script>alert(1)</script>"
NASTY_LABELS = ["<b>bold</b>", "x\" onload=\"alert(1)", "&amp;"]


class StrictPage(HTMLParser):
    """Every start tag, attribute and text run of a page, with the nesting checked."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict, tuple]] = []   # (tag, attrs, ancestors)
        self.text: list[str] = []
        self.decl: list[str] = []
        self.errors: list[str] = []
        self.started = False

    def handle_decl(self, decl):
        if self.started:
            self.errors.append(f"declaration {decl!r} after content")
        self.decl.append(decl)

    def handle_starttag(self, tag, attrs):
        self.started = True
        self.tags.append((tag, dict(attrs), tuple(self.stack)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):  # <line .../> inside SVG
        self.started = True
        self.tags.append((tag, dict(attrs), tuple(self.stack)))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data):
        if data.strip():
            if not self.started:
                self.errors.append(f"text {data.strip()[:20]!r} before the document")
            self.text.append(data)


def parse_page(text: str) -> StrictPage:
    assert text.lstrip().lower().startswith("<!doctype html>"), text[:40]
    page = StrictPage()
    page.feed(text)
    page.close()
    assert page.errors == [] and page.stack == [], (page.errors, page.stack)
    assert [d.lower() for d in page.decl] == ["doctype html"]
    names = [t for t, _, _ in page.tags]
    assert names[0] == "html" and names.count("html") == 1 and names.count("head") == 1 and names.count("body") == 1
    assert names.index("head") < names.index("body")
    head = [(t, a) for t, a, anc in page.tags if anc[:2] == ("html", "head")]
    assert ("meta", {"charset": "utf-8"}) in head and any(t == "title" for t, _ in head)
    return page


def external_references(page: StrictPage) -> list[str]:
    """Every src/href (any namespace, e.g. xlink:href) that is not data: or #, and every
    element that loads or runs something."""
    bad = []
    for tag, attrs, _ in page.tags:
        if tag in ("script", "link", "iframe", "object", "embed", "img", "base"):
            bad.append(f"<{tag}>")
        for name, value in attrs.items():
            if (name == "src" or name.endswith("href")) and not (value or "").startswith(("data:", "#")):
                bad.append(f"{tag} {name}={value!r}")
    return bad


def svgs(text: str) -> dict[str, ET.Element]:
    """The page's (or file's) <svg> elements parsed as XML, by data-plot."""
    found = {}
    for m in re.finditer(r"<svg\b.*?</svg>", text, flags=re.S):
        root = ET.fromstring(m.group(0))
        found[root.get("data-plot")] = root
    return found


# -- data -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return fitted_dir(tmp_path_factory.mktemp("report"), 300, 120)


def nasty_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 3, n)
    return pa.table({NASTY_FEATURE: rng.normal(2.0 * k, 1.0),
                     SCRIPT_FEATURE: [["<i>", "</table>", "]]>"][(j + (rng.random() < 0.2)) % 3] for j in k],
                     "y": [NASTY_LABELS[j] for j in k]})


# -- the report ----------------------------------------------------------------------------

def test_report_is_html5_without_external_references_and_holds_the_four_plots(job, tmp_path):
    out = tmp_path / "report.html"
    result = invoke("report", job / "test.parquet", "--model", f"{job}/m.duckdb:nb", "--out", out)
    assert result.exit_code == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    page = parse_page(text)
    assert external_references(page) == []
    figures = svgs(text)
    assert set(figures) == set(plots.TITLES)
    for kind, root in figures.items():
        title = root.find(f"{SVG}title")
        assert title is not None and title.text.startswith(plots.TITLES[kind])
        # inside the page, each plot is in the plots section's grid, in a figure of its own
        assert any(t == "svg" and a.get("data-plot") == kind and anc[-3:] == ("section", "div", "figure")
                   for t, a, anc in page.tags)
    body = " ".join(page.text)
    for heading in ("Model", "Decision rule", "Metrics", "Top features per class", "Parameters"):
        assert heading in body
    assert DEFAULT_DECISION in body
    assert "gaussian features: mean and variance per class" in body  # the parameters
    ev = json.loads(invoke("evaluate", job / "test.parquet", "-m", f"{job}/m.duckdb:nb", "--format", "json").stdout)
    assert f"{ev['accuracy']:.4f}" in body


def test_every_name_from_the_data_stays_text(tmp_path):
    write_parquet(nasty_table(200, 3), tmp_path / "train.parquet")
    write_parquet(nasty_table(60, 4), tmp_path / "test.parquet")
    model = f"{tmp_path}/m.duckdb:m"
    assert invoke("fit", tmp_path / "train.parquet", "-y", "y", "-m", model).exit_code == 0
    out = tmp_path / "report.html"
    result = invoke("report", tmp_path / "test.parquet", "-m", model, "-o", out)
    assert result.exit_code == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    page = parse_page(text)
    assert external_references(page) == []
    assert {t for t, _, _ in page.tags} <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "b",
                                            "nav", "a", "section", "div", "table", "caption", "thead", "tbody",
                                            "tr", "th", "td", "figure", "figcaption", "code", "svg", "rect",
                                            "text", "line", "polyline"}
    assert not any(name.startswith("on") for _, attrs, _ in page.tags for name in attrs)
    assert {t for t, _, anc in page.tags if "svg" in anc} <= {"title", "rect", "text", "line", "polyline"}
    body = "".join(page.text)
    for name in (NASTY_FEATURE, SCRIPT_FEATURE, *NASTY_LABELS, "</table>", "]]>"):
        assert name in body, name
    figures = svgs(text)  # the labels in the plots keep each SVG well-formed ...
    assert set(figures) == set(plots.TITLES)
    for kind in ("roc", "precision_recall"):  # ... and are the labels, as text
        legend = [t.text for t in figures[kind].iter(f"{SVG}text") if t.get("text-anchor") == "start"]
        assert [entry.rsplit(" (", 1)[0] for entry in legend] == sorted(NASTY_LABELS)
    cells = [t.text for t in figures["confusion_matrix"].iter(f"{SVG}text")]
    assert all(label in cells for label in NASTY_LABELS)


def test_report_of_other_kinds_and_a_decision_rule_of_the_model(job):
    table = mixed_table(200, seed=5, nulls=False).drop(["color", "flag"])
    for kind in ("lda", "qda", "logistic"):
        m = sqlnb.fit(table, "y", model=kind, exclude=["id"])
        ev, pts = evaluate(m, table), curve_points(m, table)
        page = parse_page(render(m, ev, pts, "the training rows"))
        body = " ".join(page.text)
        assert ("coefficients" in body) == (kind != "qda") and "class a" in body
    m = sqlnb.load(str(job / "m.duckdb"), "nb")
    m.decision = DecisionRule.for_model(m, reject=0.2)  # its words hold "<": escaped on the page
    data = str(job / "test.parquet")
    page = parse_page(render(m, evaluate(m, data), curve_points(m, data), "t"))
    assert "max p < 0.8" in m.decision.describe()
    assert m.decision.describe() in " ".join(page.text) and DEFAULT_DECISION not in " ".join(page.text)


def test_report_refuses_a_bad_target_before_reading(job, tmp_path):
    model = f"{job}/m.duckdb:nb"
    assert_error(invoke("report", job / "test.parquet", "-m", model, "-o", tmp_path / "r.svg"),
                 "give a .html file name")
    (tmp_path / "r.html").write_text("mine")
    before = snapshot(tmp_path / "r.html")
    assert_error(invoke("report", job / "test.parquet", "-m", model, "-o", tmp_path / "r.html"), "--replace")
    assert snapshot(tmp_path / "r.html") == before
    assert invoke("report", job / "test.parquet", "-m", model, "-o", tmp_path / "r.html", "--replace").exit_code == 0
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


# -- evaluate --plots ----------------------------------------------------------------------

def test_evaluate_plots_writes_four_svg_files_from_the_evaluation(job, tmp_path):
    d = tmp_path / "plots"
    result = invoke("evaluate", job / "test.parquet", "-m", f"{job}/m.duckdb:nb", "--plots", d, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert sorted(os.listdir(d)) == sorted(f"{stem}.svg" for stem in plots.TITLES)
    ev = json.loads(result.stdout)
    roots = {stem: ET.parse(d / f"{stem}.svg").getroot() for stem in plots.TITLES}
    for stem, root in roots.items():
        assert root.tag == f"{SVG}svg" and root.find(f"{SVG}title").text == plots.TITLES[stem]
    # the confusion matrix's cells hold the evaluation's counts, row by row
    cells = [int(t.text.replace(",", "")) for t in roots["confusion_matrix"].iter(f"{SVG}text")
             if re.fullmatch(r"[\d,]+", t.text or "")]
    assert cells == [v for row in ev["confusion"]["counts"] for v in row]
    # each ROC curve is the class's points from SQL, mapped onto the unit square
    m = sqlnb.load(str(job / "m.duckdb"), "nb")
    pts = curve_points(m, str(job / "test.parquet"), max_points=plots.CURVE_POINTS)
    lines = [p.get("points") for p in roots["roc"].iter(f"{SVG}polyline")]
    for line, cls in zip(lines, m.classes):
        xy = np.array([[float(v) for v in p.split(",")] for p in line.split()])
        np.testing.assert_allclose((xy[:, 0] - plots.LEFT) / plots.SIDE, pts["roc"][cls]["fpr"], atol=0.06 / plots.SIDE)
        np.testing.assert_allclose(1 - (xy[:, 1] - plots.TOP) / plots.SIDE, pts["roc"][cls]["tpr"],
                                   atol=0.06 / plots.SIDE)
    # again: the files exist, so without --replace nothing is touched
    before = snapshot(d, *(d / f for f in os.listdir(d)))
    assert_error(invoke("evaluate", job / "test.parquet", "-m", f"{job}/m.duckdb:nb", "--plots", d), "--replace")
    assert snapshot(d, *(d / f for f in os.listdir(d))) == before
    assert_error(invoke("evaluate", job / "test.parquet", "-m", f"{job}/m.duckdb:nb", "--plots", job / "test.parquet"),
                 "is a file")


def test_plots_from_plain_data_are_well_formed_and_placed():
    roc = plots.roc_svg({"yes": {"fpr": [0.0, 0.5, 1.0], "tpr": [0.0, 1.0, 1.0]}}, auc={"yes": 0.75})
    root = ET.fromstring(roc)
    (line,) = root.iter(f"{SVG}polyline")
    assert line.get("points").split() == [f"{plots.LEFT:.1f},{plots.TOP + plots.SIDE:.1f}",
                                          f"{plots.LEFT + plots.SIDE / 2:.1f},{plots.TOP:.1f}",
                                          f"{plots.LEFT + plots.SIDE:.1f},{plots.TOP:.1f}"]
    assert any(t.text == "yes (AUC 0.750)" for t in root.iter(f"{SVG}text"))
    table = [{"bin": 0, "lower": 0.0, "upper": 0.5, "rows": 0, "confidence": None, "accuracy": None},
             {"bin": 1, "lower": 0.5, "upper": 1.0, "rows": 10, "confidence": 0.8, "accuracy": 0.6}]
    rel = ET.fromstring(plots.reliability_svg(table, ece=0.2))
    bars = [r for r in rel.iter(f"{SVG}rect") if r.get("fill") == plots.PALETTE[0]]
    assert len(bars) == 1 and float(bars[0].get("height")) == pytest.approx(0.6 * plots.SIDE, abs=0.1)
    cm = ET.fromstring(plots.confusion_matrix_svg(["a", "<b>"], ["a", "<b>", None], [[3, 1, 0], [0, 2, 1]]))
    texts = [t.text for t in cm.iter(f"{SVG}text")]
    assert "<b>" in texts and "(none)" in texts
    empty = ET.fromstring(plots.precision_recall_svg({}))
    assert any("no class" in (t.text or "") for t in empty.iter(f"{SVG}text"))


# -- top features per class ----------------------------------------------------------------

def test_per_class_divergences_average_to_the_mutual_information():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 3, 400)
    table = pa.table({"c": [f"v{(k + (rng.random() < 0.3)) % 3}" for k in y], "b": rng.random(400) < 0.2 + 0.3 * y,
                      "y": y})
    m = sqlnb.fit(table, "y", kind="auto")
    prior = np.exp(m.log_parameters()["prior"])
    per_class = top_features_per_class(m, n=10)
    for kind, entries in top_features(m, n=10).items():
        for e in entries:
            d = [next((x["score"] for x in per_class[c] if x["name"] == e["name"]), 0.0) for c in m.classes]
            assert float(np.dot(prior, d)) == pytest.approx(e["score"], abs=1e-12), e["name"]


@pytest.mark.parametrize("mean,var,prior", [([0.0, 3.0, 1.0], [1.0, 0.25, 4.0], [0.2, 0.5, 0.3]),
                                             ([0.0, 0.1], [1.0, 0.0004], [0.5, 0.5])])
def test_gaussian_divergence_equals_adaptive_quadrature(mean, var, prior):
    mean, var, lp = np.array(mean), np.array(var), np.log(prior)
    ours = _gaussian_divergence(mean, var, lp)
    for c in range(len(mean)):
        s = math.sqrt(var[c])

        def f(x):
            mix = sum(p * norm.pdf(x, mu, math.sqrt(v)) for p, mu, v in zip(prior, mean, var))
            return norm.pdf(x, mean[c], s) * (norm.logpdf(x, mean[c], s) - math.log(mix))
        inside = [mu for mu in mean if abs(mu - mean[c]) < 15 * s]
        want = quad(f, mean[c] - 15 * s, mean[c] + 15 * s, points=inside, epsabs=1e-14, epsrel=1e-12, limit=1000)[0]
        assert ours[c] == pytest.approx(want, abs=1e-11)


# -- on PostgreSQL -------------------------------------------------------------------------

@pytest.mark.postgres
def test_report_and_plots_and_outputs_on_postgres(job, tmp_path):
    test = pq.read_table(job / "test.parquet")
    m = sqlnb.load(str(job / "m.duckdb"), "nb")
    want = evaluate(m, str(job / "test.parquet"))
    with postgres_engine({"holdout": test}) as engine:
        m.save(engine, "nb")
        pg = ["--engine", "postgres", "--dsn", engine.dsn]
        out = tmp_path / "report.html"
        done = run_sqlnb([*pg, "report", "holdout", "--model", "nb", "--out", out])
        assert done.returncode == 0, done.stderr
        text = out.read_text(encoding="utf-8")
        assert external_references(parse_page(text)) == [] and set(svgs(text)) == set(plots.TITLES)
        done = run_sqlnb([*pg, "evaluate", "holdout", "--model", "nb", "--plots", tmp_path / "plots"])
        assert done.returncode == 0, done.stderr
        cm = ET.parse(tmp_path / "plots" / "confusion_matrix.svg").getroot()
        cells = [int(t.text) for t in cm.iter(f"{SVG}text") if (t.text or "").isdigit()]
        assert cells == [v for row in want.confusion for v in row]
        done = run_sqlnb([*pg, "score", "holdout", "--model", "nb", "--key", "id", "--keep", "",
                          "--outputs", "jll,log_evidence", "--out", "-"])
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "id,jll_a,jll_b,jll_c,log_evidence" and len(lines) == 121
        local = m.score(str(job / "test.parquet"), outputs=("jll", "log_evidence"), keep=["id"]).arrow().read_all()
        got = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
        assert got[:, 0].tolist() == local["id"].to_pylist()
        np.testing.assert_allclose(got[:, 1:], np.column_stack([local[c].to_pylist() for c in local.column_names[1:]]),
                                   rtol=1e-12)
