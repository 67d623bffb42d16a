"""The report as a reader sees it: each page rendered by headless Chromium.

For a mixed naive Bayes model, a token-bag (text) model, a tree-augmented model on bins
and a model under a decision rule with costs and a reject option, the page is opened in
Debian's ``chromium`` with a probe script appended (the page itself has none), at a
desktop width and a narrow one. The probe measures, after layout: every section's
content (text, tables, table rows, plots), and every plot, figure, section and table box
whose right edge passes the window (a wide table scrolls inside its own box, which is
allowed; the box itself must fit). The browser's log must hold no console error.

Two control pages show that the probes can fail: one with a plot wider than the window,
one whose script throws.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.models.decision import DecisionRule
from sqlnb.workflows.curves import curve_points
from sqlnb.workflows.evaluate import evaluate
from sqlnb.workflows.html_report import SECTIONS, render
from support.cli import mixed_table

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                                          "(bash .ci/install-engines.sh installs it)")

#: Appended before ``</body>``: measures the laid-out page into ``<pre id="probe">``.
PROBE = """<script>
addEventListener('load', () => {
  const W = document.documentElement.clientWidth;
  const out = {width: W, scrollWidth: document.documentElement.scrollWidth, sections: {}, overflow: []};
  for (const s of document.querySelectorAll('section')) {
    const h = s.querySelector('h2');
    out.sections[s.id] = {text: s.innerText.length - (h ? h.innerText.length : 0),
                          tables: s.querySelectorAll('table').length, rows: s.querySelectorAll('tbody tr').length,
                          svgs: s.querySelectorAll('svg').length, cells: [...s.querySelectorAll('td')].map(td => td.innerText)};
  }
  for (const el of document.querySelectorAll('svg, figure, section, .scroll, nav, h1, p')) {
    const r = el.getBoundingClientRect();
    if (r.right > W + 0.5 || r.left < -0.5) out.overflow.push(el.tagName + (el.id ? '#' + el.id : ''));
  }
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def browse(page: str, path: Path, width: int = 1280) -> tuple[dict, str]:
    """(the probe's measures, the browser's log) of ``page`` opened at ``width`` px."""
    path.write_text(page.replace("</body>", PROBE + "\n</body>"), encoding="utf-8")
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--window-size={width},900", "--virtual-time-budget=3000", "--enable-logging=stderr",
                           "--v=0", "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"the probe did not run: {done.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">")), done.stderr


def console_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if "CONSOLE" in line and ("Uncaught" in line or ":ERROR:" in line)]


def text_table(n: int, seed: int) -> pa.Table:
    """Short documents of three topics: 5 topic words, 5 common words, 2 from any topic."""
    rng = np.random.default_rng(seed)
    words = {"sport": "goal match team win score ball coach league".split(),
             "tech": "code chip data cloud server model bug release".split(),
             "food": "bread cheese wine taste recipe oven salt sugar".split()}
    common, anywhere = "the a of and to in is it".split(), sum(words.values(), [])
    topics = rng.choice(list(words), n)
    docs = [" ".join(rng.permutation([*rng.choice(words[t], 5), *rng.choice(common, 5), *rng.choice(anywhere, 2)]))
            for t in topics]
    return pa.table({"body": docs, "topic": topics.tolist()})


def _page(model, data) -> str:
    return render(model, evaluate(model, data), curve_points(model, data), "the test rows")


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    train, test = mixed_table(400, seed=1), mixed_table(200, seed=2)
    ruled = sqlnb.fit(train, "y", exclude=["id"])
    ruled.decision = DecisionRule.for_model(ruled, costs={("a", "b"): 5.0, ("c", "a"): 2.0}, reject=0.3)
    return {
        "mixed": _page(sqlnb.fit(train, "y", exclude=["id"]), test),
        "text": _page(sqlnb.fit(text_table(300, 1), "topic", feature_kinds={"body": "multinomial"}),
                      text_table(150, 2)),
        "tan": _page(sqlnb.fit(train, "y", exclude=["id"], structure="tan", bins="quantile:4"), test),
        "rule": _page(ruled, test),
    }


@pytest.mark.parametrize("kind", ["mixed", "text", "tan", "rule"])
def test_every_section_has_content_nothing_overflows_and_the_console_is_clean(pages, kind, tmp_path):
    # every page at a desktop width; the mixed one (the same style sheet) at a narrow one too
    for width in (1280, 700) if kind == "mixed" else (1280,):
        probe, log = browse(pages[kind], tmp_path / f"{kind}.html", width)
        assert probe["overflow"] == [] and probe["scrollWidth"] <= probe["width"], (width, probe["overflow"])
        assert console_errors(log) == []
    sections = probe["sections"]
    assert list(sections) == [a for a, _ in SECTIONS]
    for name, s in sections.items():
        assert s["text"] > 40, f"section {name} of the {kind} report is empty"
    assert sections["model"]["tables"] >= 3 and sections["metrics"]["rows"] >= 10
    assert sections["plots"]["svgs"] == 4
    top = sections["features"]
    assert top["tables"] >= 3 and top["rows"] >= 3
    # no "top feature" whose score prints as zero
    assert not any(re.fullmatch(r"-?0(\.0+)?(e[-+]?\d+)?", c) for c in top["cells"]), top["cells"]
    if kind == "text":  # its terms, per class
        assert {"goal", "code", "bread"} <= set(top["cells"])
    if kind == "tan":  # the tables conditioned on each tree parent
        assert sections["parameters"]["tables"] > 5
        assert "tree: p(" in pages[kind]
    if kind == "rule":  # the cost and reject figures that evaluate prints
        cells = sections["metrics"]["cells"]
        assert any(c.startswith("expected cost") for c in cells) and "rejection rate" in cells


def test_the_probes_can_fail(tmp_path):
    """A plot wider than the window and a script that throws are both caught (one page)."""
    bad = ('<!DOCTYPE html><html><head><title>t</title></head><body><section id="s"><h2>s</h2>'
           '<svg id="w" width="3000" height="10"></svg></section><script>undefined_fn()</script></body></html>')
    probe, log = browse(bad, tmp_path / "bad.html", 800)
    assert "svg#w" in probe["overflow"] and probe["scrollWidth"] > probe["width"]
    assert console_errors(log), log[-1000:]


def test_the_adult_report_reads_well_and_is_the_one_in_the_docs(tmp_path):
    """The report of naive Bayes on UCI adult (the docs' example), probed as above and
    photographed; ``SQLNB_WRITE_DOCS=1`` writes the picture to docs/report_adult.png,
    which docs/cli.md shows."""
    import duckdb

    import support.shared_data as sd

    sd.require_shared_data("adult_train", "adult_test")
    con = duckdb.connect()
    model = sqlnb.fit(sqlnb.Query(sd.render(sd.adult_train_query())), "income", con=con, exclude=["fnlwgt"])
    model.name = "adult"
    test = sqlnb.Query(sd.render(sd.adult_test_query()))
    page = render(model, evaluate(model, test, con), curve_points(model, test, con), "adult.test")
    probe, log = browse(page, tmp_path / "adult.html")
    assert probe["overflow"] == [] and console_errors(log) == []
    assert all(s["text"] > 40 for s in probe["sections"].values())
    shot = tmp_path / "adult.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1400,2000", f"--screenshot={shot}", (tmp_path / "adult.html").as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("SQLNB_WRITE_DOCS") == "1":
        shutil.copyfile(shot, Path(__file__).resolve().parents[1] / "docs" / "report_adult.png")
