"""The best model sqlnb has, chosen by cross-validation on the training rows alone:
``sqlnb fit --auto`` (:func:`auto_fit`).

The candidates are tried in stages, cheapest first, each a :func:`~sqlnb.workflows.cv.cross_validate`
over the same stratified folds (seed 0) of the training rows, numeric columns in MDL bins:

1. naive Bayes, α ∈ {0.5, 1, 2};
2. the ensemble of selective KDBs (``eskdb``, :mod:`sqlnb.models.naive_bayes.eskdb`) at
   α = 1 (:data:`STAGE_ALPHAS`), each fold's members drawn and chosen on its training rows;
3. naive Bayes with learnt weights (:mod:`sqlnb.models.naive_bayes.weighted`), its λ chosen
   inside each fold's training rows (nested);
4. the one-dependence structures (TAN, KDB(1), AODE) × α, one pooled cross-validation;
5. KDB(2) and the average of TAN, KDB(2) and AODE × α.

The ensemble goes first after naive Bayes: it was the most accurate candidate on spambase
and adult's complete rows (docs/accuracy.md), and the budget is wall-clock seconds. With
the weights before it, on spambase's first two outer training sets of the accuracy
benchmark, on a machine at load ~5, the budget ran out before the ensemble's stage could
start, and the weights' 7.17 % and 5.33 % stood against the ensemble's 5.10 % and 5.11 %.

Two more stages then vary the best candidate so far (its kind and parameters kept):

6. bins: equal-frequency cut points (:data:`OTHER_BINS`) instead of MDL's;
7. features: the features kept by a backward selection
   (:func:`~sqlnb.workflows.select.select_features`, TAN over the same folds and the best
   bins so far: the adult page's protocol), when it leaves any out.

The winner has the highest mean cross-validated accuracy (ties: the lower mean log loss,
then the earlier candidate), and is refitted on every training row. A stage starts only
while the time budget lasts; the stages left out are listed, so the table says what was
and was not tried. Nothing of the held-out folds decides a fold's model: structures,
cut points and counts come from each fold's training rows (``cross_validate``). The
features stage is the exception, said in its row: the selection sees every training row,
so the CV figure of the features it keeps is optimistic by what the search over subsets
adds (the other candidates' figures are maxima over small grids only).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from sqlnb import api
from sqlnb.errors import SqlnbError
from sqlnb.workflows.cv import cross_validate
from sqlnb.workflows.select import select_features

#: Smoothing strengths every count-based candidate is tried with.
ALPHAS = (0.5, 1.0, 2.0)
#: Stages tried at other strengths: the ensemble at α = 1 only. Its members' back-off m
#: (chosen by leave-one-out per feature and depth) smooth the deep tables, and α only the
#: naive rows they back off to: on spambase's first outer training set the 5-fold CV gave
#: the same accuracy, 94.24 %, at α 0.5, 1 and 2 (log loss 0.1918, 0.1910, 0.1905) and
#: took 184.5 s for the three (/tmp/esk_cv.py spambase 0.5,1,2).
STAGE_ALPHAS = {"ensemble of selective KDBs": (1.0,)}
#: The stages, in the order they run: (name, model kind, grid of structures or None).
STAGES = (
    ("naive Bayes", "naive_bayes", ("naive",)),
    ("ensemble of selective KDBs", "naive_bayes", ("eskdb",)),
    ("learnt weights", "weighted", None),
    ("one-dependence structures", "naive_bayes", ("tan", "kdb:1", "aode")),
    ("two-dependence structures", "naive_bayes", ("kdb:2", "tan+kdb:2+aode")),
)
#: The stages that vary the best candidate so far, in the order they run.
REFINEMENTS = ("bins", "features")
#: Equal-frequency discretisations the bins stage tries instead of MDL's cut points.
OTHER_BINS = ("quantile:5", "quantile:10")
#: Default time budget of :func:`auto_fit`, in seconds.
BUDGET = 300.0


@dataclass
class AutoResult:
    """What :func:`auto_fit` tried and chose.

    Attributes
    ----------
    tried : list of dict
        One row per candidate: ``stage``, ``model``, ``params``, ``bins``, ``features``
        (None: every feature), ``accuracy`` and ``log_loss`` (means over the folds),
        ``seconds`` (of its stage).
    skipped : list of str
        The stages the budget left out.
    refused : dict
        The stages the data cannot build, by name: why (e.g. structures on fewer than two
        discrete features).
    best : dict
        The winning row of ``tried``.
    model : Model
        The winner refitted on every training row.
    seconds : float
        The whole search.
    """

    tried: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    refused: dict = field(default_factory=dict)
    best: dict | None = None
    model: Any = None
    seconds: float = 0.0

    def table(self) -> str:
        """The candidates as a text table, the chosen one marked ``*``, and the stages left out."""
        width = max([36, *(len(describe(row)) for row in self.tried)])
        lines = [f"  {'model':<{width}} {'accuracy':>9} {'log loss':>9} {'stage s':>8}"]
        for row in self.tried:
            mark = "*" if row is self.best else " "
            lines.append(f"{mark} {describe(row):<{width}} {row['accuracy']:>9.4f} {row['log_loss']:>9.4f} "
                         f"{row['seconds']:>8.1f}")
        lines += [f"  {stage}: not tried (time budget)" for stage in self.skipped]
        lines += [f"  {stage}: not tried ({why})" for stage, why in self.refused.items()]
        if self.best is not None and self.best["model"] == "weighted":  # its penalty, chosen by the refit's CV
            lines.append(f"  the chosen model's l2: {self.model.l2:g} (5-fold CV on every training row)")
        return "\n".join(lines)


def describe(row: dict) -> str:
    """A candidate in a few words: its kind and parameters."""
    p = dict(row["params"])
    structure = p.pop("structure", "naive")
    kind = ("weighted naive Bayes" if row["model"] == "weighted" else
            "naive Bayes" if structure == "naive" else structure)
    parts = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(p.items())]
    if row.get("bins", "mdl") != "mdl":
        parts.append(f"bins={row['bins']}")
    if row.get("features") is not None:
        n = len(row['features'])
        parts.append(f"{n} feature{'' if n == 1 else 's'}")
    return f"{kind} {', '.join(parts)}".strip()


def auto_fit(data: Any, label: str, *, con=None, budget: float = BUDGET, folds: int = 5, seed: int = 0,
             features: Sequence[str] | None = None, exclude: Sequence[str] | None = None,
             keep_columns: Sequence[str] | None = None) -> AutoResult:
    """Cross-validate sqlnb's candidates (module docstring) on ``data`` and refit the best.

    Parameters
    ----------
    data, label, con, features, exclude, keep_columns
        As for :func:`sqlnb.fit`.
    budget : float
        Seconds: a stage starts only before they have passed (the first always runs).
    folds, seed : int
        The cross-validation's folds.

    Returns
    -------
    AutoResult
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
        raise SqlnbError(f"the time budget must be a positive number of seconds, not {budget!r}")
    start = time.perf_counter()
    result = AutoResult()
    common = dict(con=con, folds=folds, seed=seed, features=features, exclude=exclude, keep_columns=keep_columns,
                  bins="mdl")
    def run(stage: str, kind: str, grid: dict | None, begun: float, bins: str = "mdl",
            chosen: Sequence[str] | None = None, **fixed: Any) -> None:
        """One cross-validation; its rows join the table, its best may become the winner."""
        # the chosen features replace the caller's features or exclusions
        options = {**common, "bins": bins, **({"features": list(chosen), "exclude": None} if chosen is not None else {})}
        cv = cross_validate(data, label, model=kind, grid=grid, **options, **fixed)
        seconds = time.perf_counter() - begun
        rows = [{"stage": stage, "model": kind, "params": {**fixed, **r["params"]}, "bins": bins,
                 "features": None if chosen is None else list(chosen), "accuracy": r["mean_accuracy"],
                 "log_loss": r["mean_log_loss"], "seconds": seconds} for r in cv.results]
        result.tried.extend(rows)
        # the stage's best is cross_validate's (the same rule: accuracy, then log loss, then order)
        best = next(row for row in rows if row["params"] == {**fixed, **cv.best_params})
        if result.best is None or (best["accuracy"], -best["log_loss"]) > (result.best["accuracy"],
                                                                           -result.best["log_loss"]):
            result.best, result.model = best, cv.best_model

    def attempt(name: str, *args: Any, **fixed: Any) -> None:
        """``run(*args, **fixed)``, or why the data cannot build its candidates: a structure
        needs two discrete features to pair, which the bins or features tried may not leave."""
        try:
            run(*args, **fixed)
        except SqlnbError as e:
            result.refused[name] = str(e)

    stages = [*(s[0] for s in STAGES), *REFINEMENTS]
    for i, stage in enumerate(stages):
        if i > 0 and time.perf_counter() - start >= budget:
            result.skipped.append(stage)
            continue
        begun = time.perf_counter()
        if i < len(STAGES):
            _, kind, structures = STAGES[i]
            alphas = list(STAGE_ALPHAS.get(stage, ALPHAS))
            grid = {"structure": list(structures), "alpha": alphas} if structures is not None else None
            if i == 0 or structures is None:  # naive Bayes and the weights build on any data the fit takes
                run(stage, kind, grid, begun)
            else:
                attempt(stage, stage, kind, grid, begun)
            continue
        lead = result.best  # the refinements vary the best candidate so far, its parameters fixed
        if stage == "bins":
            for bins in OTHER_BINS:
                attempt(f"{stage} {bins}", stage, lead["model"], None, begun, bins, lead["features"], **lead["params"])
        else:
            try:
                kept = _selected_features(data, label, lead, common)
            except SqlnbError as e:  # its TAN needs two discrete features to pair
                result.refused[stage] = str(e)
                continue
            if kept is not None:
                attempt(stage, stage, lead["model"], None, begun, lead["bins"], kept, **lead["params"])
    result.model.report = {**result.model.report,
                           "auto": {"tried": [dict(r) for r in result.tried], "skipped": result.skipped,
                                    "refused": dict(result.refused)}}
    result.seconds = time.perf_counter() - start
    return result


#: What ``fit(auto=True)`` passes on to :func:`auto_fit`; every other option is one the search chooses.
_AUTO_OPTIONS = ("con", "features", "exclude", "keep_columns", "folds", "seed")


def fit(data: Any, label: str, *, auto: bool = False, budget: float | None = None, **options: Any):
    """:func:`sqlnb.api.fit` (``sqlnb.fit``), or with ``auto=True`` the winner of :func:`auto_fit`.

    ``auto=True`` takes the options :func:`auto_fit` takes (``con``, ``features``,
    ``exclude``, ``keep_columns``, ``folds``, ``seed`` and ``budget``); the model kind,
    structure, α, bins and weighting are the search's to choose, so giving one is an error.
    The winner's ``report["auto"]`` holds what was tried (:class:`AutoResult`'s rows).
    """
    if not auto:
        if budget is not None:
            raise SqlnbError("budget is the time budget of auto=True; add auto=True or leave budget out")
        return api.fit(data, label, **options)
    chosen = sorted(set(options) - set(_AUTO_OPTIONS))
    if chosen:
        raise SqlnbError(f"auto=True chooses {', '.join(chosen)} itself; leave {'it' if len(chosen) == 1 else 'them'} "
                         f"out, or fit without auto=True")
    return auto_fit(data, label, budget=BUDGET if budget is None else budget, **options).model


# ``help(sqlnb.fit)``: api.fit's parameters, with the two of the search before its Returns.
fit.__doc__ = api.fit.__doc__.replace("    Returns\n", """    auto : bool
        Choose the model by cross-validation on the training rows within ``budget``
        (:func:`sqlnb.workflows.auto.auto_fit`: kind, structure, α, bins, weighting and
        features), refitted on every row; only ``con``, ``features``, ``exclude``,
        ``keep_columns``, ``folds`` and ``seed`` may be given beside it.
    budget : float
        Seconds the search may start stages in (default 300), with ``auto=True`` only.

    Returns\n""", 1)
fit.__signature__ = inspect.signature(api.fit).replace(parameters=[
    *(p for p in inspect.signature(api.fit).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD),
    inspect.Parameter("auto", inspect.Parameter.KEYWORD_ONLY, default=False, annotation="bool"),
    inspect.Parameter("budget", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="float | None"),
    inspect.Parameter("hyperparameters", inspect.Parameter.VAR_KEYWORD, annotation="Any")])


def _selected_features(data: Any, label: str, lead: dict, common: dict) -> list[str] | None:
    """The features a backward selection with TAN keeps (over the same folds, with the
    leading candidate's bins), or None when it keeps them all."""
    options = {k: v for k, v in common.items() if k != "bins"}
    chosen = select_features(data, label, direction="backward", structure="tan", bins=lead["bins"], refit=False,
                             **options)
    return None if len(chosen.features) == len(chosen.candidates) else list(chosen.features)
