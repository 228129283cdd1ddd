#!/usr/bin/env python3
"""Every `posenc ...` command line in the ```sh blocks of the README and the
manual's pages (docs/) parses: its
subcommands exist, every --option it passes is one that subcommand's --help
lists, it holds no shell operator (a `|` in `--kind a|b` runs a pipe when
pasted), and the line with --help appended exits 0 (CLI11 runs the options'
own checks before --help). What it does with its values is the other tests'
business: this only keeps the documented commands in step with the tool.
    doc_commands.py POSENC PAGE.md [PAGE.md ...]   (a directory: its *.md, recursively)"""
import pathlib
import re
import shlex
import subprocess
import sys

posenc = sys.argv[1]
pages = []
for argument in sys.argv[2:]:
    path = pathlib.Path(argument)
    pages.extend(sorted(path.rglob("*.md")) if path.is_dir() else [path])


def commands(text):
    """(line number, command text) of each posenc line in a ```sh block, continuations joined."""
    in_sh, pending, start = False, "", 0
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            in_sh = line == "```sh"
            continue
        if not in_sh:
            continue
        if pending:
            pending += " " + line.strip()
        elif line.startswith("posenc "):
            pending, start = line, number
        else:
            continue
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        yield start, pending
        pending = ""


def help_text(chain):
    run = subprocess.run([posenc, *chain, "--help"], capture_output=True, text=True)
    return run.returncode, run.stdout + run.stderr


def subcommands(help_output):
    section = re.split(r"(?im)^subcommands:$", help_output, maxsplit=1)
    return set(re.findall(r"^  (\S+)", section[1], re.M)) if len(section) == 2 else set()


problems = []
count = 0
checked = [(page, number, line) for page in pages for number, line in commands(page.read_text(encoding="utf-8"))]
for page, number, line in checked:
    where = f"{page}:{number}"
    count += 1
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)[1:]
    operators = [t for t in tokens if t and set(t) <= set("|&;<>()")]
    if operators:
        problems.append(f"{where}: shell operator {operators[0]!r} in: {line}")
        continue
    chain = []
    rc, out = help_text(chain)
    while tokens[len(chain):] and not tokens[len(chain)].startswith("-") and tokens[len(chain)] in subcommands(out):
        chain.append(tokens[len(chain)])
        rc, out = help_text(chain)
    rest = tokens[len(chain):]
    if not chain or (subcommands(out) and rest and not rest[0].startswith("-")):
        problems.append(f"{where}: no such subcommand: {line}")
        continue
    for option in (t.split("=", 1)[0] for t in tokens[len(chain):] if t.startswith("--")):
        if not re.search(re.escape(option) + r"(?![\w-])", out):
            problems.append(f"{where}: posenc {' '.join(chain)} has no option {option}: {line}")
    run = subprocess.run([posenc, *tokens, "--help"], capture_output=True, text=True)
    if run.returncode != 0:
        problems.append(f"{where}: exit {run.returncode} with --help: {line}\n{run.stdout}{run.stderr}")
for problem in problems:
    print(problem)
if problems:
    sys.exit(1)
print(f"doc commands: {count} posenc command lines parse in {len(pages)} pages")
