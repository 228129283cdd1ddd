#!/usr/bin/env python3
"""The checklists of docs/extending.md name files and symbols that exist, and
every step that the code has.

A reference in the page is a backticked path under one of the repository's
source folders, `src/x.cc`, or a path and a symbol, `src/x.cc:Symbol`
(`Class::Member` for a member: each part must be found). A path with a
`<placeholder>` names a file to create: its folder must exist.

Fails when:
- a named file does not exist, or a named symbol is not a word of its file;
- a section holds no reference (a checklist that checks nothing);
- a source file that names the section's example (Shaw's encoding, KERPLE,
  Leaky ReRoPE, Gemma 3) is not named in that section: the code has a step
  the checklist lacks. A placeholder `dir/<name>.cc` covers the example's own
  file in dir/.

    extending_checklist.py [ROOT]     (ROOT: the repository, by default the one holding this file)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
PAGE = "docs/extending.md"
FOLDERS = ("src/", "include/", "tools/", "python/", "tests/", "scripts/", "examples/", "measure/", "bench/")
REFERENCE = re.compile(r"`([A-Za-z0-9_./<>-]+(?:\.[a-z]+|/[a-z_-]+))(?::([A-Za-z_][A-Za-z0-9_:]*))?`")

# Section heading -> (a regular expression for its example, the folders whose files must be named).
EXAMPLES = {
    "Add an attention encoding": (r"\bShawEncoding\b|\bShawAttention\b", ("src", "include", "tools", "python")),
    # Tests are not held to it: a test naming KERPLE among others is no step of adding a scheme.
    "Add a trainable positional scheme (train short, test long)": (r"[Kk]erple", ("src", "include", "tools", "python")),
    "Add a context-extension method": (r"kLeakyReRope|leaky-rerope|LeakyReRope", ("src", "include", "tools", "python")),
    "Add a model family": (r"kGemma3|gemma3", ("src", "include", "tools", "python")),
}


def sections(text):
    """{heading: body} of the page's ## sections."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def references(body):
    for match in REFERENCE.finditer(body):
        path, symbol = match.group(1), match.group(2)
        if path.startswith(FOLDERS) or path == "CMakeLists.txt":
            yield path, symbol


def files_matching(pattern, folders):
    """Files under folders (relative paths) whose text matches pattern."""
    regex, found = re.compile(pattern), set()
    for folder in folders:
        for file in (ROOT / folder).rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts and file.suffix not in (".pyc", ".png", ".gguf"):
                if regex.search(file.read_text(encoding="utf-8", errors="replace")):
                    found.add(file.relative_to(ROOT).as_posix())
    return found


def main():
    text = (ROOT / PAGE).read_text(encoding="utf-8")
    problems, count = [], 0
    for path, symbol in references(text):
        count += 1
        if "<" in path:
            if not (ROOT / path).parent.is_dir():
                problems.append(f"{PAGE}: `{path}`: no folder {(ROOT / path).parent.relative_to(ROOT)}")
            continue
        file = ROOT / path
        if not file.is_file():
            problems.append(f"{PAGE}: `{path}`: no such file")
            continue
        if symbol:
            source = file.read_text(encoding="utf-8", errors="replace")
            missing = [part for part in symbol.split("::") if not re.search(rf"\b{re.escape(part)}\b", source)]
            if missing:
                problems.append(f"{PAGE}: `{path}:{symbol}`: {', '.join(missing)} not found in {path}")

    found = sections(text)
    for heading, (pattern, folders) in EXAMPLES.items():
        if heading not in found:
            problems.append(f"{PAGE}: no section '## {heading}'")
            continue
        named = {path for path, _ in references(found[heading])}
        if not named:
            problems.append(f"{PAGE}: '## {heading}' names no file")
        placeholders = {path.rsplit("/", 1)[0] for path in named if "<" in path}
        for path in sorted(files_matching(pattern, folders)):
            if path not in named and path.rsplit("/", 1)[0] not in placeholders:
                problems.append(f"{PAGE}: '## {heading}': {path} names the example (/{pattern}/) "
                                f"but the checklist does not name {path}")

    for problem in problems:
        print(problem)
    if problems:
        sys.exit(1)
    print(f"extending checklists: {count} references to files and symbols, each found; "
          f"every file naming the examples is in its checklist")


main()
