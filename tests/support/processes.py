"""A whole ``sqlnb`` process's cost: its peak resident memory (the memory-budget tests)."""

from __future__ import annotations

import subprocess
import sys

#: Runs ``sys.argv[1:]`` as the wrapper's only child and prints that child's peak RSS (KiB
#: on Linux), so nothing the test process did before counts.
WRAPPER = ("import resource, subprocess, sys\n"
           "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
           "sys.exit(rc)\n")


def peak_mib(args: list[str], timeout: float = 180.0) -> float:
    """Peak RSS (MiB) of ``python -m sqlnb args`` as a whole process; fails on a non-zero exit."""
    done = subprocess.run([sys.executable, "-c", WRAPPER, sys.executable, "-m", "sqlnb", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1]) / 1024
