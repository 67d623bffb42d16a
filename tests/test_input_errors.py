"""Input a newcomer writes by hand, and what ``sqlnb fit`` says about it: an empty file is
one line naming it; a headerless CSV whose first row became the header gets the options
that read it (``--no-header --names``) in the missing label's error; a column of numbers
made text by one marker (``?``, the UCI files' missing value) is named with the value and
``--null-string``."""

from __future__ import annotations

from click.testing import CliRunner

from sqlnb.cli import cli
from support.cli import assert_error, invoke

CAR = ("vhigh,vhigh,2,2,small,low,unacc\nvhigh,vhigh,2,4,small,med,unacc\n"
       "low,med,4,more,big,high,vgood\nlow,low,5more,more,big,high,vgood\n")


def test_an_empty_file_is_one_line_naming_it(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    assert_error(invoke("fit", empty, "--label", "y", "--model", f"{tmp_path}/m.duckdb:m"),
                 f"Error: {str(empty)!r} is empty (0 bytes): it holds no header and no row; give a file of rows")
    blank = tmp_path / "blank.csv"
    blank.write_text("\n\n")
    assert_error(invoke("fit", blank, "--label", "y", "--model", f"{tmp_path}/m.duckdb:m"),
                 f"Error: {str(blank)!r} is empty (blank lines only)")
    assert_error(invoke("fit", tmp_path / "*.csv", "--label", "y", "--model", f"{tmp_path}/m.duckdb:m"),
                 f"every file matching {str(tmp_path / '*.csv')!r} is empty")
    r = CliRunner().invoke(cli, ["fit", "-", "--label", "y", "--model", f"{tmp_path}/m.duckdb:m"], input="")
    assert_error(r, "Error: standard input (DATA -) is empty: it holds no header and no row; pipe the CSV rows in")
    assert not (tmp_path / "m.duckdb").exists()


def test_a_first_row_read_as_the_header_gets_the_options_that_read_it_as_a_row(tmp_path):
    path = tmp_path / "car.csv"
    path.write_text(CAR)
    line = assert_error(invoke("fit", path, "--label", "class", "--model", f"{tmp_path}/m.duckdb:m"),
                        "label column 'class' not found")
    assert line.endswith("its columns are: vhigh, vhigh_1, 2, 2_1, small, low, unacc; the first line was read as the "
                         "header, but its field 'vhigh' is also a value of its own column 'vhigh': if the file has no "
                         "header, give --no-header --names COL,... (every column, in order) to name the columns and "
                         "read that line as a row")
    # A repeated name alone (DuckDB's vhigh_1), or a name that is a number, says it too.
    path.write_text("vhigh,vhigh,doors,class\nlow,med,2,a\nmed,low,3,b\n")
    line = assert_error(invoke("fit", path, "--label", "label", "--model", f"{tmp_path}/m.duckdb:m"))
    assert "but its name 'vhigh_1' is DuckDB's for a second 'vhigh': if the file has no header, give --no-header " \
           "--names COL,..." in line
    path.write_text("size,2,class\n10,big,a\n20,small,b\n")
    line = assert_error(invoke("fit", path, "--label", "label", "--model", f"{tmp_path}/m.duckdb:m"))
    assert "but its field '2' reads as a value: if the file has no header" in line
    # The options it names read the file.
    path.write_text(CAR)
    r = invoke("fit", path, "--no-header", "--names", "buying,maint,doors,persons,lug,safety,class",
               "--label", "class", "--model", f"{tmp_path}/m.duckdb:m")
    assert r.exit_code == 0, r.stderr


def test_a_file_read_without_a_header_says_to_name_its_columns(tmp_path):
    path = tmp_path / "car.csv"
    path.write_text(CAR.replace("5more", "5"))  # all text: DuckDB finds no header
    line = assert_error(invoke("fit", path, "--label", "class", "--model", f"{tmp_path}/m.duckdb:m"))
    assert line.endswith("its columns are: column0, column1, column2, column3, column4, column5, column6; the file was "
                         "read without a header (DuckDB found none), so its columns are numbered: name them with "
                         "--names COL,... (every column, in order)")


def test_a_header_that_looks_like_a_header_adds_nothing(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text("age,color,y\n39,red,a\n50,blue,b\n")
    line = assert_error(invoke("fit", path, "--label", "label", "--model", f"{tmp_path}/m.duckdb:m"))
    assert line.endswith("its columns are: age, color, y")


UCI = "age,color,y\n" + "".join(f"{'?' if i in (1, 7) else 20 + 3 * i},{'?' if i == 5 else 'red' if i % 2 else 'blue'},"
                                 f"{'ab'[i % 2]}\n" for i in range(11))


def test_a_marker_that_makes_numbers_text_is_named_with_the_fix(tmp_path):
    path = tmp_path / "uci.csv"
    path.write_text(UCI)
    r = invoke("fit", path, "--label", "y", "--model", f"{tmp_path}/m.duckdb:m")
    assert r.exit_code == 0, r.stderr
    # 'color' holds '?' too, but among words: a category, no note.
    assert r.stderr == ("note: column 'age' is read as text because of the value '?' in 2 rows (of 11); if it marks "
                        "missing values, pass --null-string '?' (Files(path, options={'nullstr': ['', '?']}) in "
                        "Python)\n")
    r = invoke("fit", path, "--label", "y", "--null-string", "?", "--model", f"{tmp_path}/m.duckdb:m", "--replace")
    assert r.exit_code == 0 and r.stderr == ""
    # A type the user gave is no guess: no note.
    r = invoke("fit", path, "--label", "y", "--columns", "age=VARCHAR", "--model", f"{tmp_path}/m.duckdb:m",
               "--replace")
    assert r.exit_code == 0 and r.stderr == ""


def test_a_word_among_numbers_that_is_a_value_gets_no_note(tmp_path):
    # The UCI car data: persons 2, 4 or more; doors 2, 3, 4 or 5more. Values, not marks.
    path = tmp_path / "car.csv"
    path.write_text("doors,persons,class\n" + "".join(f"{d},{p},{'ab'[i % 2]}\n" for i, (d, p) in enumerate(
        [("2", "2"), ("3", "4"), ("5more", "more"), ("4", "more"), ("2", "4"), ("3", "2")])))
    r = invoke("fit", path, "--label", "class", "--model", f"{tmp_path}/m.duckdb:m")
    assert r.exit_code == 0 and r.stderr == ""
    path.write_text("age,y\n" + "".join(f"{'N/A' if i == 3 else 20 + i},{'ab'[i % 2]}\n" for i in range(8)))
    r = invoke("fit", path, "--label", "y", "--model", f"{tmp_path}/m.duckdb:m", "--replace")
    assert r.exit_code == 0
    assert r.stderr.startswith("note: column 'age' is read as text because of the value 'N/A' in 1 row (of 8); if "
                               "it marks missing values, pass --null-string N/A ")


def test_the_fix_a_hint_shows_pastes_into_a_shell_as_it_reads(tmp_path):
    """A hint names the options that fix the input; a column name with a space, a comma or
    a quote is written as one shell word (``--exclude 'x y'``), so the command the hint
    completes runs when pasted into a shell. It read ``--exclude x y`` (two arguments)."""
    import re
    import shlex
    import subprocess

    from support.cli import SCRIPT
    rows = ["y,x y,\"p,q\",amount"] + [f"{'ab'[i % 2]},{'uvw'[i % 3]},{'st'[i % 2]},{i * 1.5}" for i in range(12)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    base = f"{shlex.quote(str(SCRIPT))} fit t.csv --label y --kind lda --model m.duckdb:m --replace"

    def shell(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    first = shell(base)
    assert first.returncode == 2, first.stderr
    hint = re.search(r"--exclude (\S+|'[^']*')\)", first.stderr).group(1)
    assert hint == "'x y'", first.stderr
    second = shell(f"{base} --exclude {hint}")
    assert second.returncode == 2 and "'p,q'" in second.stderr, second.stderr
    hint2 = re.search(r"--exclude ('[^']*')\)", second.stderr).group(1)
    assert hint2 == "'\"p,q\"'", second.stderr  # the column list's quotes, inside the shell's
    done = shell(f"{base} --exclude {hint},{hint2}")
    assert done.returncode == 0, done.stderr


def test_a_column_without_a_default_kind_gets_both_fixes(tmp_path):
    """A date column has no default kind: one line naming it, with the option and the
    Python argument that give it a kind or leave it out; each fix, taken, fits."""
    import sqlnb
    (tmp_path / "d.csv").write_text("y,when,x\n" + "".join(
        f"{'ab'[i % 2]},2024-01-{1 + i:02d},{i % 3}\n" for i in range(12)))
    done = invoke("fit", tmp_path / "d.csv", "--label", "y", "--model", f"{tmp_path}/m.duckdb:m")
    assert_error(done, "Error: column 'when' has type DATE, which has no default kind; give it one (--feature-kind "
                       "when=categorical, feature_kinds={'when': 'categorical'} in Python) or leave it out (--exclude "
                       "when, exclude=['when'])")
    assert invoke("fit", tmp_path / "d.csv", "--label", "y", "--model", f"{tmp_path}/m.duckdb:m",
                  "--feature-kind", "when=categorical").exit_code == 0
    assert sqlnb.fit(str(tmp_path / "d.csv"), "y", exclude=["when"]).feature_names == ["x"]
