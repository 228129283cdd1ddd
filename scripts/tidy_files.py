"""The files scripts/check-tidy checks, written one per line to LISTING.

    tidy_files.py ROOT SCOPE DATABASE UNIQUE LISTING [FILE...]

SCOPE is one of
  changed  the default scope's translation units that changed since the
           commit in .ci/tidy-clean, or that include (at any depth) a project
           file that changed since; every one of them when there is no stamp,
           when it is not an ancestor of HEAD, or when what decides the
           findings changed (the .clang-tidy files, CMakePresets.json,
           check-tidy, this file)
  full     every translation unit of the default scope (src/, measure/,
           bench/, the fuzz target)
  all      also tools/ and tests/cpp/
  files    the FILEs given
UNIQUE gets DATABASE with one entry per file (the fuzz target compiles some
library files a second time).
"""
import json
import os
import re
import subprocess
import sys

DEFAULT_DIRS = ("src/", "measure/", "bench/", "tests/fuzz/")
ALL_DIRS = DEFAULT_DIRS + ("tools/", "tests/cpp/")
STAMP = ".ci/tidy-clean"
# A change to one of these can change any file's findings: the checks, the
# tidy preset's flags (CMakePresets.json), how clang-tidy is run.
CONFIGURATION = re.compile(r"(^|/)\.clang-tidy$|^CMakePresets\.json$|^scripts/check-tidy$|^scripts/tidy_files\.py$")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


def git(root, *args):
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)


def include_dirs(entry):
    """The -I directories of a compile command, absolute."""
    tokens = entry["command"].split() if "command" in entry else entry["arguments"]
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
            try:
                text = open(current, encoding="utf-8", errors="replace").read()
            except OSError:
                text = ""
            memo[current] = INCLUDE.findall(text)
        for name in memo[current]:
            for base in [os.path.dirname(current)] + dirs:
                candidate = os.path.realpath(os.path.join(base, name))
                if candidate.startswith(root + os.sep) and os.path.isfile(candidate):
                    if candidate not in found:
                        found.add(candidate)
                        stack.append(candidate)
                    break
    return found


def changed_since_stamp(root):
    """(stamp, the absolute paths changed since it) or (reason, None) when
    every file must be checked."""
    stamp_path = os.path.join(root, STAMP)
    if not os.path.isfile(stamp_path):
        return f"no {STAMP}", None
    stamp = open(stamp_path).read().strip()
    if git(root, "merge-base", "--is-ancestor", stamp, "HEAD").returncode != 0:
        return f"{STAMP} ({stamp[:12]}) is not an ancestor of HEAD", None
    diff = git(root, "diff", "--name-only", stamp)
    untracked = git(root, "ls-files", "--others", "--exclude-standard")
    if diff.returncode != 0 or untracked.returncode != 0:
        return f"git diff {stamp[:12]} failed: {diff.stderr.strip()}", None
    names = diff.stdout.split() + untracked.stdout.split()
    touched = [n for n in names if CONFIGURATION.search(n)]
    if touched:
        return f"{', '.join(touched)} changed since {stamp[:12]}", None
    return stamp, {os.path.realpath(os.path.join(root, n)) for n in names}


def main():
    root, scope, source, unique, listing, *wanted = sys.argv[1:]
    root = os.path.realpath(root)
    entries, seen = [], set()
    for entry in json.load(open(source)):
        if entry["file"] not in seen:
            seen.add(entry["file"])
            entries.append(entry)
    json.dump(entries, open(unique, "w"), indent=1)

    def under(dirs):
        return [e for e in entries if os.path.relpath(e["file"], root).startswith(dirs)]

    if scope == "files":
        files = [os.path.abspath(f) for f in wanted]
        missing = [f for f in files if f not in seen]
        if missing:
            sys.exit("check-tidy: not in the compile database: " + " ".join(missing))
    elif scope == "all":
        files = [e["file"] for e in under(ALL_DIRS)]
    elif scope == "full":
        files = [e["file"] for e in under(DEFAULT_DIRS)]
    else:
        default = under(DEFAULT_DIRS)
        stamp, changed = changed_since_stamp(root)
        if changed is None:
            print(f"check-tidy: every file of the default scope ({stamp})")
            files = [e["file"] for e in default]
        else:
            memo = {}
            files = [e["file"] for e in default
                     if os.path.realpath(e["file"]) in changed
                     or project_includes(os.path.realpath(e["file"]), include_dirs(e), root, memo) & changed]
            print(f"check-tidy: {len(files)} of the default scope's {len(default)} files changed since "
                  f"{stamp[:12]} ({STAMP}), or include a file that did")
    open(listing, "w").write("".join(f + "\n" for f in files))


main()
