"""A script of the repository (docs/*.py, benchmarks/*.py: not in a package) imported as a
module, for the tests that compare a page with what its script computes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """The file ``path`` imported as module ``name`` (default: its stem), registered in
    ``sys.modules`` (its dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
