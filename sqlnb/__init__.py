"""sqlnb: probabilistic classifiers trained and scored inside the database, in SQL.

The public names, in the order of the data flow: sources, fitting, model kinds, stored
models, and what is built on fitted models. The layout behind them is in the README's
"How it works".
"""

from sqlnb.version import __version__
from sqlnb.errors import SqlnbError

# The public names below are imported on first use (PEP 562), so that ``import sqlnb`` -- which
# ``sqlnb --version`` does -- costs nothing until the library is used: DuckDB, pyarrow,
# numpy and sqlglot are most of a cold start.
_LAZY = {
    "Files": "sqlnb.source", "Query": "sqlnb.source", "Table": "sqlnb.source",
    **{name: "sqlnb.api" for name in ("MODELS", "connect", "drop", "fit_lda", "fit_logistic", "fit_long",
                                      "fit_qda", "list_models", "load")},
    **{name: "sqlnb.models" for name in ("LDA", "QDA", "Hyperparameters", "Logistic", "NaiveBayes")},
    "WeightedNaiveBayes": "sqlnb.models.naive_bayes.weighted",
    **{name: "sqlnb.models.naive_bayes.text" for name in ("TextOptions", "mutual_information", "top_terms")},
    "calibrate": "sqlnb.models.calibration",
    "learning_curves": "sqlnb.workflows.compare",
    "cross_validate": "sqlnb.workflows.cv",
    # fit is api.fit with auto=True on top (the search lives above the api layer)
    **{name: "sqlnb.workflows.auto" for name in ("auto_fit", "fit")},
    "evaluate": "sqlnb.workflows.evaluate",
    "report": "sqlnb.workflows.html_report",
    "select_features": "sqlnb.workflows.select",
    **{name: "sqlnb.workflows.generative" for name in ("fit_em", "flag_novel", "novelty_threshold", "sample",
                                                       "update")},
}
#: Modules reachable as attributes (``sqlnb.compare``, ``sqlnb.export``, as the docs use them).
#: ``sqlnb.models`` is the package of model kinds (``sqlnb.models.NaiveBayes``, ...); the saved
#: models of a database are listed by ``sqlnb.list_models``.
_LAZY_MODULES = {"compare": "sqlnb.workflows.compare", "export": "sqlnb.workflows.export",
                 "estimators": "sqlnb.estimators", "models": "sqlnb.models"}


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(_LAZY_MODULES[name])
    else:
        raise AttributeError(f"module 'sqlnb' has no attribute {name!r}")
    globals()[name] = value  # once found, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_MODULES))


__all__ = ["__version__", "SqlnbError", "Files", "Query", "Table",
           "fit", "fit_lda", "fit_qda", "fit_logistic", "fit_long", "connect", "MODELS",
           "NaiveBayes", "Hyperparameters", "LDA", "QDA", "Logistic", "TextOptions",
           "load", "list_models", "drop", "models",
           "WeightedNaiveBayes", "cross_validate", "auto_fit", "select_features", "learning_curves",
           "mutual_information", "top_terms",
           "update", "sample", "fit_em", "novelty_threshold", "flag_novel", "calibrate", "evaluate", "report", "estimators"]
