"""The shell sessions shown in README.md and docs/*.md, parsed and run as a user runs them.

A *shell block* is a fenced block (```text, ```console, ```bash, ```sh or a bare fence)
whose first line starts with ``$ ``. Each ``$ COMMAND`` line is a command (continued by a
trailing backslash, or by a heredoc ``<<'EOF'`` up to its ``EOF`` line); the lines after it,
up to the next ``$`` line, are its output: stdout and stderr together, as a terminal shows
them.

HTML comments right before a fence (invisible on GitHub) say how the block is run:

* ``<!-- doc-test: session NAME -->`` -- this block and the following ones of the file run in
  the session NAME (default: ``main``) until another session comment. A session is one bash
  process in a fresh, empty temporary directory: the commands of all its blocks run there in
  document order, so a later block sees the files an earlier one wrote.
* ``<!-- doc-test: session NAME requires ../shared/data/adult -->`` -- the session needs that
  path (relative to the repository root). The temporary directory has a sibling ``shared``
  linked to the repository's ``../shared``, so ``../shared/data/...`` in a command means the
  same files as from the repository root.
* ``<!-- doc-test: file NAME -->`` -- the block is not a session: its text is written to
  NAME in the session's directory before the session runs (the docs say "save this as NAME").
* ``<!-- doc-test: engine postgres -->`` -- the block's commands need a PostgreSQL server (their
  DSN is a placeholder): ``tests/test_docs.py`` leaves the block to
  ``tests/test_docs_postgres.py``, which runs it against a throw-away server, with that
  server's DSN in place of the placeholder (see there).
* ``<!-- doc-test: not run: REASON -->`` -- the block is not run (a diagram, a formula, a
  synopsis, a call on placeholder files or servers, a benchmark of minutes); the test lists
  these blocks with their reasons.

Every fenced block of the docs is one of these: a shell block run in a session, a ``file``
block, an ``engine`` block, or marked ``not run`` with a reason. Any other block is
*unmarked* (:attr:`Block.unmarked`), and ``tests/test_docs.py`` allows none, so a block
added without a test fails until it is made to run or says why it is not. An indented
code block (four spaces, outside a list) cannot carry a directive: it is reported as
unmarked too (write it as a fence).

Only the run-dependent text in :data:`NORMALISE` is replaced before comparing, in the
documented output and in the actual output alike.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_FENCES = {"", "text", "console", "bash", "sh", "shell"}
DIRECTIVE = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")

#: (pattern, replacement): a timestamp, a number of seconds, the versions ``show`` prints
#: (``with sqlnb 0.1.0, duckdb 2.0.1``: a fresh install may bring a newer DuckDB patch release
#: than the one the docs were written with). Temporary paths are replaced separately (the
#: session's own directory becomes <TMP>).
NORMALISE = (
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?"), "<TIMESTAMP>"),
    (re.compile(r"\b\d+(\.\d+)? s\b"), "<SECONDS> s"),
    (re.compile(r"\b(sqlnb|duckdb) \d+\.\d+\.\d+[\w.+-]*"), r"\1 <VERSION>"),
    # another process named in an error (docs/concurrency.md): its PID and program differ per run
    (re.compile(r"\(PID \d+: \S+"), "(PID <PID>: <PROGRAM>"),
)


@dataclass
class Command:
    """One ``$`` command of a block and the output the docs show for it."""

    text: str                    # the shell command, continuation lines included
    line: int                    # 1-based line of the ``$`` in the markdown file
    output: list[str]            # documented output lines, trailing blank lines removed
    output_line: int             # 1-based line of the first output line


@dataclass
class Block:
    path: Path
    line: int                    # 1-based line of the opening fence
    lang: str
    body: list[str]
    session: str = "main"
    requires: tuple[str, ...] = ()
    file: str | None = None      # write the body to this file instead of running it
    not_run: str | None = None   # reason
    engine: str | None = None    # run by that engine's own doc test, not as a session
    commands: list[Command] = field(default_factory=list)
    indented: bool = False       # an indented code block (no fence: cannot carry a directive)

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def is_session(self) -> bool:
        """A shell block whose commands run in its session (module docstring)."""
        return bool(self.commands) and self.not_run is None and self.engine is None and self.file is None

    @property
    def unmarked(self) -> bool:
        """Neither run (session, file or engine block) nor marked ``not run``."""
        return (self.indented or (not self.is_session and self.file is None and self.engine is None
                                  and self.not_run is None))


def parse_commands(body: list[str], first_line: int) -> list[Command]:
    """Split a shell block's lines (the first at markdown line ``first_line``) into commands."""
    commands: list[Command] = []
    i = 0
    while i < len(body):
        line = body[i]
        if not line.startswith("$ "):
            raise ValueError(f"line {first_line + i}: output before any '$ ' command: {line!r}")
        start = i
        text = [line[2:]]
        i += 1
        heredoc = HEREDOC.search(text[0])
        if heredoc:
            while i < len(body) and body[i] != heredoc.group(2):
                text.append(body[i])
                i += 1
            text.append(body[i] if i < len(body) else heredoc.group(2))
            i += 1
        else:
            while text[-1].endswith("\\") and i < len(body):
                text.append(body[i])
                i += 1
        out_start = i
        while i < len(body) and not body[i].startswith("$ "):
            i += 1
        output = body[out_start:i]
        while output and not output[-1].strip():
            output.pop()
        commands.append(Command("\n".join(text), first_line + start, output, first_line + out_start))
    return commands


LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


def parse_markdown(path: Path) -> list[Block]:
    """Every fenced block (shell, ``file`` and any other) and every indented code block of
    one markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    session, requires = "main", ()
    pending: list[str] = []      # directives seen since the last fence
    in_list = False              # indented lines after a list item continue it
    i = 0
    while i < len(lines):
        line = lines[i]
        m = DIRECTIVE.match(line.strip())
        if m:
            pending.append(m.group(1))
            i += 1
            continue
        fence = re.match(r"^```(\S*)\s*$", line)
        if not fence:
            if line.startswith("    ") and line.strip() and not in_list and (i == 0 or not lines[i - 1].strip()):
                j = i
                while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                    j += 1
                blocks.append(Block(path, i + 1, "", [ln[4:] for ln in lines[i:j]], indented=True))
                i = j
                continue
            if line.strip():
                pending = []     # a directive belongs to the fence right after it
                if not line.startswith(" "):
                    in_list = bool(LIST_ITEM.match(line))
            i += 1
            continue
        in_list = False
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1:j]
        block = Block(path, i + 1, fence.group(1), body)
        for d in pending:
            if d.startswith("session "):
                words = d.split()
                session = words[1]
                requires = tuple(words[3:]) if len(words) > 3 and words[2] == "requires" else ()
            elif d.startswith("file "):
                block.file = d.split(None, 1)[1]
            elif d.startswith("engine "):
                block.engine = d.split(None, 1)[1]
            elif d.startswith("not run:"):
                block.not_run = d.split(":", 1)[1].strip()
            else:
                raise ValueError(f"{path.name}:{i}: unknown doc-test directive {d!r}")
        pending = []
        block.session, block.requires = session, requires
        if (block.file is None and block.not_run is None and block.lang in SHELL_FENCES
                and body and body[0].startswith("$ ")):
            block.commands = parse_commands(body, i + 2)
        blocks.append(block)
        i = j + 1
    return blocks


def all_blocks() -> list[Block]:
    """The blocks of every file in :data:`DOCS`, in order."""
    return [b for path in DOCS for b in parse_markdown(path)]


def normalise(lines: list[str], tmp: str | None = None) -> list[str]:
    out = []
    for line in lines:
        if tmp:
            line = line.replace(tmp, "<TMP>")
        for pattern, repl in NORMALISE:
            line = pattern.sub(repl, line)
        out.append(line.rstrip())
    return out


def prepare(tmp: Path) -> tuple[Path, dict]:
    """The session's working directory ``tmp/work`` (empty) and its environment: ``../shared``
    beside it, and a PATH whose ``sqlnb`` and ``python`` are this checkout's."""
    work = tmp / "work"
    work.mkdir()
    shared = REPO.parent / "shared"
    if shared.exists():
        (tmp / "shared").symlink_to(shared, target_is_directory=True)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, args in (("sqlnb", "-m sqlnb "), ("python", "")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" {args}"$@"\n')
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQLNB_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["LC_ALL"] = "C.UTF-8"  # `ls` and `sort` order by code point on every machine
    # the checkout under test first (the venv may have another sqlnb installed editable)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return work, env


MARK = "@@doc-test {}@@"


def session_script(commands: list[Command]) -> str:
    """One bash script running the commands in order; after each, a marker line, and the
    command's exit status restored so that a documented ``echo $?`` sees it."""
    parts = []
    for k, c in enumerate(commands):
        parts.append(c.text)
        parts.append(f"__doc_rc=$?; printf '\\n{MARK.format(k)}\\n'; (exit $__doc_rc)")
    return "\n".join(parts) + "\n"


def split_output(text: str, n: int) -> list[list[str]]:
    """The combined output of :func:`session_script` as one list of lines per command."""
    outputs = []
    rest = text
    for k in range(n):
        marker = "\n" + MARK.format(k) + "\n"
        head, sep, rest = rest.partition(marker)
        if not sep:  # the session died before this command's marker
            outputs.append(head.splitlines() + ["<no output marker: the session stopped here>"])
            outputs.extend([["<not run>"]] * (n - k - 1))
            return outputs
        lines = head.splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        outputs.append(lines)
    return outputs


def mismatch(c: Command, expected: list[str], actual: list[str], block: Block) -> str | None:
    """None when equal; else a message naming the file, block, command and first differing
    line, followed by both outputs side by side up to a few lines past the difference."""
    if expected == actual:
        return None
    k = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    doc_line = c.output_line + k
    head = c.text.splitlines()[0]
    msg = [f"{block.path.name}:{doc_line}: output of `$ {head}` (block at line {block.line}, "
           f"command at line {c.line}) differs at its output line {k + 1}:"]
    msg.append(f"    docs: {expected[k]!r}" if k < len(expected) else "    docs: <output ends>")
    msg.append(f"    now:  {actual[k]!r}" if k < len(actual) else "    now:  <output ends>")
    msg.append(f"  ({len(expected)} lines documented, {len(actual)} printed; after normalising)")
    return "\n".join(msg)
