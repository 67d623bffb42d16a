"""A whole ``sqlnb`` process's cost: its peak resident memory (the memory-budget tests), and
whether it imported pandas."""

from __future__ import annotations

import json
import subprocess
import sys

#: Runs ``sys.argv[1:]`` as the wrapper's only child and prints that child's peak RSS (KiB
#: on Linux), so nothing the test process did before counts.
WRAPPER = ("import resource, subprocess, sys\n"
           "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
           "sys.exit(rc)\n")


#: Runs the sqlnb command line in this process, then says on stderr whether pandas was imported.
RUN_CLI = ("import runpy, sys\n"
           "sys.argv = ['sqlnb', *sys.argv[1:]]\n"
           "try:\n"
           "    runpy.run_module('sqlnb', run_name='__main__')\n"
           "except SystemExit as e:\n"
           "    assert not e.code, e.code\n"
           "print('pandas' in sys.modules, file=sys.stderr)\n")


def run_cli_saying_pandas(*args: str) -> subprocess.CompletedProcess:
    """``sqlnb args`` run to success in a fresh process (within 180 s); the last line of its
    stderr says ``True`` or ``False``: whether pandas was imported."""
    done = subprocess.run([sys.executable, "-c", RUN_CLI, *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


#: Runs the sqlnb command line after setting attributes of :mod:`sqlnb.io.output` (its memory
#: limits) to the values of the JSON object in ``sys.argv[1]``.
RUN_OVERRIDDEN = ("import json, sys\n"
                  "import sqlnb.io.output as output\n"
                  "for name, value in json.loads(sys.argv.pop(1)).items():\n"
                  "    setattr(output, name, value)\n"
                  "sys.argv[0] = 'sqlnb'\n"
                  "from sqlnb.cli import main\n"
                  "main()\n")


def peak_mib(args: list[str], timeout: float = 180.0, overrides: dict | None = None) -> float:
    """Peak RSS (MiB) of ``python -m sqlnb args`` as a whole process; fails on a non-zero exit.
    ``overrides``: attributes of :mod:`sqlnb.io.output` set first (e.g. a memory limit scaled
    down with the data)."""
    sqlnb = ["-c", RUN_OVERRIDDEN, json.dumps(overrides)] if overrides else ["-m", "sqlnb"]
    done = subprocess.run([sys.executable, "-c", WRAPPER, sys.executable, *sqlnb, *args],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1]) / 1024
