"""A module of this repository as it was at an earlier commit, for tests that compare the
code now with the code then (the expected output computed, not stored)."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@contextmanager
def module_at(commit: str, path: str, directory: pathlib.Path) -> Iterator[ModuleType]:
    """The file ``path`` at ``commit`` (read with ``git show``, written into ``directory``)
    imported as a module of its own, named ``<stem>_<commit>``, while the context lasts.
    Fails the test, naming the commit, when git cannot give it (a shallow clone)."""
    try:
        text = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.fail(f"this test reads {path} at {commit[:7]} from git and could not ({e}); fetch that commit")
    name = f"{pathlib.Path(path).stem}_{commit[:7]}"
    file = directory / f"{name}.py"
    file.write_text(text)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
