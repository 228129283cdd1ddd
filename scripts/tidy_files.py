"""The files scripts/check-tidy checks, and the stamp it writes when they pass.

    tidy_files.py ROOT SCOPE DATABASE UNIQUE LISTING NEW_STAMP [FILE...]

SCOPE is one of
  unchecked  the default scope's translation units (src/, measure/, bench/,
             the fuzz target) that .ci/tidy-clean does not list as passed
             with their current contents: the file, every project file it
             includes at any depth, its compile command (the flags, the
             warnings), and what decides every file's findings (the
             .clang-tidy files, check-tidy, this file, clang-tidy's version)
  full       every translation unit of the default scope
  all        also tools/ and tests/cpp/
  files      the FILEs given
LISTING gets the files to check, one a line; NEW_STAMP the stamp to write if
they all pass (the default scope's files that passed before, unchanged, and
those checked now). UNIQUE gets DATABASE with one entry per file (the fuzz
target compiles some library files a second time).
"""
import hashlib
import json
import os
import re
import subprocess
import sys

DEFAULT_DIRS = ("src/", "measure/", "bench/", "tests/fuzz/")
ALL_DIRS = DEFAULT_DIRS + ("tools/", "tests/cpp/")
STAMP = ".ci/tidy-clean"
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


def configuration_digest(root):
    """What can change any file's findings: the checks, how clang-tidy is
    run, and clang-tidy itself (each file's flags are in its own digest)."""
    h = hashlib.sha256()
    listed = subprocess.run(["git", "-C", root, "ls-files", "--", ".clang-tidy", "*/.clang-tidy"],
                            capture_output=True, text=True, check=True)
    names = sorted(listed.stdout.split())
    for name in names + ["scripts/check-tidy", "scripts/tidy_files.py"]:
        h.update(name.encode() + b"\0" + open(os.path.join(root, name), "rb").read() + b"\0")
    tidy = os.environ.get("tidy", "clang-tidy")
    h.update(subprocess.run([tidy, "--version"], capture_output=True).stdout)
    return h


def command_tokens(entry):
    return entry["command"].split() if "command" in entry else entry["arguments"]


def include_dirs(entry):
    """The -I directories of a compile command, absolute."""
    tokens = command_tokens(entry)
    dirs = []
    for i, token in enumerate(tokens):
        if token == "-I" and i + 1 < len(tokens):
            dirs.append(tokens[i + 1])
        elif token.startswith("-I"):
            dirs.append(token[2:])
    return [os.path.join(entry["directory"], d) for d in dirs]


def project_includes(path, dirs, root, memo):
    """Every project file that `path` includes, at any depth (system and
    third-party headers are outside ROOT and not followed)."""
    found, stack = set(), [path]
    while stack:
        current = stack.pop()
        if current not in memo:
            with open(current, encoding="utf-8", errors="replace") as f:
                memo[current] = INCLUDE.findall(f.read())
        for name in memo[current]:
            for base in [os.path.dirname(current)] + dirs:
                candidate = os.path.realpath(os.path.join(base, name))
                if candidate.startswith(root + os.sep) and os.path.isfile(candidate):
                    if candidate not in found:
                        found.add(candidate)
                        stack.append(candidate)
                    break
    return found


def stamp_line(entry, root, memo, configuration):
    """'KEY PATH': KEY digests the configuration, the compile command (with
    the checkout's path taken out: a fresh clone elsewhere has the same key),
    the file and its project includes."""
    path = os.path.realpath(entry["file"])
    h = configuration.copy()
    h.update(" ".join(command_tokens(entry)).replace(root, "").encode() + b"\0")
    for f in sorted({path} | project_includes(path, include_dirs(entry), root, memo)):
        h.update(os.path.relpath(f, root).encode() + b"\0" + open(f, "rb").read() + b"\0")
    return f"{h.hexdigest()} {os.path.relpath(path, root)}"


def main():
    root, scope, source, unique, listing, new_stamp, *wanted = sys.argv[1:]
    root = os.path.realpath(root)
    entries, seen = [], set()
    for entry in json.load(open(source)):
        if entry["file"] not in seen:
            seen.add(entry["file"])
            entries.append(entry)
    json.dump(entries, open(unique, "w"), indent=1)

    def under(dirs):
        return [e for e in entries if os.path.relpath(e["file"], root).startswith(dirs)]

    default = under(DEFAULT_DIRS)
    configuration, memo = configuration_digest(root), {}
    lines = {e["file"]: stamp_line(e, root, memo, configuration) for e in default}
    stamp_path = os.path.join(root, STAMP)
    passed = set(open(stamp_path).read().splitlines()) if os.path.isfile(stamp_path) else set()

    if scope == "files":
        files = [os.path.abspath(f) for f in wanted]
        missing = [f for f in files if f not in seen]
        if missing:
            sys.exit("check-tidy: not in the compile database: " + " ".join(missing))
    elif scope == "all":
        files = [e["file"] for e in under(ALL_DIRS)]
    elif scope == "full":
        files = [e["file"] for e in default]
    else:
        files = [e["file"] for e in default if lines[e["file"]] not in passed]
        print(f"check-tidy: {len(default) - len(files)} of the default scope's {len(default)} files passed "
              f"with their contents and includes as they are ({STAMP}); checking the other {len(files)}")
    open(listing, "w").write("".join(f + "\n" for f in files))
    checked = set(files)
    kept = [line for file, line in lines.items() if line in passed or file in checked]
    kept.sort(key=lambda line: line.split()[1])  # by path: a change shows as the lines of its files
    open(new_stamp, "w").write("".join(line + "\n" for line in kept))


main()
