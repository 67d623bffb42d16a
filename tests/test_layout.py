"""The package layout keeps its shape: imports flow one way, and files stay readable.

Every module under ``sqlnb/`` is parsed with :mod:`ast` (imports inside functions
included, ``TYPE_CHECKING`` blocks too) and each import of a ``sqlnb`` module becomes an
edge. The test fails on

* an import cycle between modules;
* an import from a lower layer to a higher one, or between two independent siblings of
  one layer (below, ``|`` separates the siblings; they may not import each other);
* a module that belongs to no layer (place a new module in ``LAYERS``);
* a module over ``MAX_LINES`` lines.

The layers, lowest first (the README's "How it works" draws the same map)::

    version | errors | crash            what every layer may use (crash: kill -9 leftovers)
    sql                                 building and rendering trees, column types
    source                              what a source is, resolved to columns and types
    stats                               sufficient statistics, merged exactly
    engines                             run a tree, resolve a source (DuckDB, PostgreSQL, Spark)
    store | io                          models as tables | where data and results live
    models.finish | models.priors | models.newton
                                        the log-sum-exp finish | class priors | Newton's method
    models.venn_abers                   Venn–Abers step functions (a calibrator's part)
    models.decision | models.explain | models.calibration | models.conformal
                                        decision rules | explanations (stages after the finish) |
                                        calibrators of the class scores (before it) | conformal sets
    models.base                         the Model every kind shares
    models.naive_bayes | models.dense   naive Bayes (families, text bags) | dense features
    models.discriminant | models.logistic
    models                              the package facade
    api                                 fit, fit_lda, ..., load: data in, a model out
    workflows                           cv, compare, generative, evaluate, report, export, demo
    estimators                          scikit-learn estimators on fit/update/Model
    sqlnb                               the package: the public names
    cli | reference                     the command line | the reference SQL under sql/
    __main__                            python -m sqlnb

Within one package (``sqlnb.models.naive_bayes``, ``sqlnb.workflows``, ...) modules may
import each other as long as no cycle forms.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "sqlnb"
MAX_LINES = 700

#: Lowest layer first; a layer is a list of independent siblings (module name prefixes).
LAYERS: list[list[str]] = [
    ["sqlnb.version", "sqlnb.errors", "sqlnb.crash"],
    ["sqlnb.sql"],
    ["sqlnb.source"],
    ["sqlnb.stats"],
    ["sqlnb.engines"],
    ["sqlnb.store", "sqlnb.io"],
    ["sqlnb.models.finish", "sqlnb.models.priors", "sqlnb.models.newton"],
    ["sqlnb.models.venn_abers"],
    ["sqlnb.models.decision", "sqlnb.models.explain", "sqlnb.models.calibration", "sqlnb.models.conformal"],
    ["sqlnb.models.base"],
    ["sqlnb.models.naive_bayes", "sqlnb.models.dense"],
    ["sqlnb.models.discriminant", "sqlnb.models.logistic"],
    ["sqlnb.models"],
    ["sqlnb.api"],
    ["sqlnb.workflows"],
    ["sqlnb.estimators"],
    ["sqlnb"],
    ["sqlnb.cli", "sqlnb.reference"],
    ["sqlnb.__main__"],
]


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def place(module: str) -> tuple[int, str] | None:
    """(layer index, sibling prefix) of ``module``: the longest prefix that names it.
    The bare ``sqlnb`` matches only the package itself, so a new module must be placed."""
    best = None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            hit = module == prefix if prefix == "sqlnb" else (module == prefix or module.startswith(prefix + "."))
            if hit and (best is None or len(prefix) > len(best[1])):
                best = (i, prefix)
    return best


def imports(path: Path, name: str, known: set[str]) -> list[tuple[str, int]]:
    """``(imported sqlnb module, line)`` for every import in the file, at any depth."""
    is_package = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # ``from pkg import sub`` imports the submodule when there is one.
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        out += [(t, node.lineno) for t in targets if t == "sqlnb" or t.startswith("sqlnb.")]
    return out


def graph(root: Path = PACKAGE) -> tuple[dict[str, Path], dict[str, list[tuple[str, int]]]]:
    mods = modules(root)
    known = set(mods)
    edges = {}
    for name, path in mods.items():
        resolved = []
        for target, line in imports(path, name, known):
            while target not in known and "." in target:  # ``from sqlnb.x import name``
                target = target.rsplit(".", 1)[0]
            if target != name:
                resolved.append((target, line))
        edges[name] = resolved
    return mods, edges


def layer_violations(mods, edges, root: Path = PACKAGE) -> list[str]:
    problems = []
    for name in mods:
        if place(name) is None:
            problems.append(f"{name} belongs to no layer: add it to LAYERS in tests/test_layout.py")
    for name, targets in edges.items():
        here = place(name)
        if here is None:
            continue
        for target, line in targets:
            there = place(target)
            if there is None:
                continue
            where = f"{mods[name].relative_to(root.parent)}:{line}"
            if there[0] > here[0]:
                problems.append(f"{where}: {name} (layer {here[0]}, {here[1]}) imports {target} "
                                f"(layer {there[0]}, {there[1]}), a higher layer")
            elif there[0] == here[0] and there[1] != here[1]:
                problems.append(f"{where}: {name} imports {target}, an independent sibling in its layer")
    return problems


def cycles(edges) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = itertools.count()

    def visit(v: str) -> None:
        index[v] = low[v] = next(counter)
        stack.append(v)
        on_stack.add(v)
        for w, _ in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def long_modules(mods, root: Path = PACKAGE) -> list[str]:
    out = []
    for name, path in mods.items():
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            out.append(f"{path.relative_to(root.parent)} has {n} lines (at most {MAX_LINES}): split it")
    return out


def test_imports_form_no_cycle():
    _, edges = graph()
    assert cycles(edges) == []


def test_imports_flow_down_the_layers():
    mods, edges = graph()
    assert layer_violations(mods, edges) == []


def test_every_module_fits_in_one_reading():
    assert long_modules(modules()) == []


# -- the checks themselves fail when they should ----------------------------------------------


@pytest.fixture
def tree(tmp_path):
    """A copy of the package in a temporary folder, to break on purpose."""
    import shutil
    dest = tmp_path / "sqlnb"
    shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _graph_of(root: Path):
    mods, edges = graph(root)
    return mods, edges, layer_violations(mods, edges, root), cycles(edges), long_modules(mods, root)


def test_an_upward_import_inside_a_function_is_caught(tree):
    errors = tree / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _late():\n    from sqlnb.api import fit\n    return fit\n")
    _, _, violations, found, _ = _graph_of(tree)
    assert any("sqlnb.errors" in v and "imports sqlnb.api" in v and "higher layer" in v for v in violations)
    assert any("sqlnb.errors" in c and "sqlnb.api" in c for c in found)  # api imports errors: a cycle


def test_an_import_between_siblings_is_caught(tree):
    dense = tree / "models" / "dense.py"
    dense.write_text(dense.read_text() + "\nfrom sqlnb.models.naive_bayes import model as _nb  # noqa\n")
    _, _, violations, _, _ = _graph_of(tree)
    assert any("sqlnb.models.dense imports sqlnb.models.naive_bayes.model, an independent sibling" in v
               for v in violations)


def test_a_relative_import_is_read_too(tree):
    store = tree / "store" / "catalog.py"
    store.write_text(store.read_text() + "\nfrom ..workflows import cv as _cv  # noqa\n")
    _, _, violations, _, _ = _graph_of(tree)
    assert any("sqlnb.store.catalog" in v and "imports sqlnb.workflows.cv" in v for v in violations)


def test_a_new_unplaced_module_and_a_long_one_are_caught(tree):
    (tree / "misc.py").write_text("\n".join(f"x{i} = {i}" for i in range(MAX_LINES + 1)) + "\n")
    _, _, violations, _, long = _graph_of(tree)
    assert "sqlnb.misc belongs to no layer: add it to LAYERS in tests/test_layout.py" in violations
    assert f"sqlnb/misc.py has {MAX_LINES + 1} lines (at most {MAX_LINES}): split it" in long
