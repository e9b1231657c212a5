#!/usr/bin/env bash
# docs-check: the documentation names only things that exist. For README.md, docs/*.md and
# tests/reference/README.md it fails (exit 1, one `file:line: what` line per finding) when
#   - a relative markdown link `[..](path)` or a repository path in the text (`scripts/x.sh`,
#     `rtl/mxu/tpu_mxu_pe.sv`, `docs/x.md`, ...) names a file or folder that does not exist
#     (generated outputs under build/ and runs/, paths outside the repository and paths with
#     placeholders such as <timestamp>, `*`, `...` or {a|b} are not checked);
#   - a `make TARGET` (in backticks or a code block) names no rule of the Makefile
#     (`make VAR=value target` checks `target`);
#   - a doc names the sittings the work was done in (the word "sess"+"ion", any case): the
#     order in which work was done belongs in `git log`;
#   - a doc names a git commit: a word of 7 to 40 lowercase hexadecimal characters with at least
#     one digit and one letter a-f (`git checkout <hash>`, "at <hash>"). A 0x literal
#     (0x7FC00000, 0x1234abcd) is not a word of its own and passes; write any other hex value
#     (an encoding, a trace word) with its 0x. Words without a digit (deadbeef) pass;
#   - a doc gives a chain of figures: a number, optionally one unit word, then `->` or `→`, then
#     a number (1,040,705 -> 1,009,369; 6.5 MB → 2.05 MB): a doc states today's figure, and how
#     it changed belongs in `git log`. An arrow between words (HBM -> UB) passes, and so does a
#     number mapped to a 0x literal (1.0→0x3F80). Put a before/after that is not history in two
#     columns or in words ("2.05 MB against 6.5 MB").
# Otherwise it prints one summary line and exits 0.
# Usage: scripts/docs_check.sh [--root DIR]    check DIR (default: the repository)
#        scripts/docs_check.sh --self-test     run the checker on generated good and bad trees
# Needs bash and python3 (standard library only).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v python3 >/dev/null 2>&1; then
  echo "docs-check: needs python3 (apt-get install python3)" >&2
  exit 1
fi

if [ "${1:-}" = "--self-test" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  word="sess""ion"
  for tree in good bad; do
    mkdir -p "$tmp/$tree/docs" "$tmp/$tree/scripts"
    printf 'sim: build\n\t@true\nbuild:\n\t@true\nVAR ?= 1\n' >"$tmp/$tree/Makefile"
    : >"$tmp/$tree/scripts/run.sh"
    printf '# Good\nSee [a](docs/a.md), `scripts/run.sh`, `make sim`, `make VAR=2 build`,\n' \
      >"$tmp/$tree/README.md"
    printf '`build/x.json`, `runs/<timestamp>/loss.png`, `docs/*.md`.\n' >>"$tmp/$tree/README.md"
    printf '# A\n[back](../README.md)\n```\nmake sim\n```\n' >"$tmp/$tree/docs/a.md"
  done
  printf '%s\n' 'Fine: `0x7FC00000`, a 0x1234abcd literal, deadbeef, HBM -> UB, conv1 → pool2.' \
    >>"$tmp/good/docs/a.md"
  printf 'Bad: [gone](missing.md), `scripts/gone.sh`, `make nosuch`,\n' >>"$tmp/bad/docs/a.md"
  printf 'the third %s, `make VAR="a b" alsonot`.\n' "$word" >>"$tmp/bad/docs/a.md"
  printf '%s\n' 'The step took 598,916 cycles at 277ecf4;' 'now 6.5 MB → 2.05 MB.' \
    >>"$tmp/bad/docs/a.md"
  "$0" --root "$tmp/good" >"$tmp/good.out" 2>&1 || {
    echo "docs-check self-test: FAILED — a correct tree was rejected:" >&2
    cat "$tmp/good.out" >&2
    exit 1
  }
  if "$0" --root "$tmp/bad" >"$tmp/bad.out" 2>&1; then
    echo "docs-check self-test: FAILED — a tree with bad links passed" >&2
    exit 1
  fi
  n="$(grep -c '^docs/a.md:[0-9]*: ' "$tmp/bad.out" || true)"
  if [ "$n" -ne 7 ]; then
    echo "docs-check self-test: FAILED — expected 7 findings in the bad tree, got $n:" >&2
    cat "$tmp/bad.out" >&2
    exit 1
  fi
  echo "docs-check self-test: ok (a correct tree passes, a tree with 7 faults gives 7 findings)"
  exit 0
fi

root="$(cd "$here/.." && pwd)"
if [ "${1:-}" = "--root" ]; then
  root="$(cd "$2" && pwd)"
fi

exec python3 - "$root" <<'PYTHON'
import os
import re
import sys

root = sys.argv[1]
WORD = re.compile("sess" + "ion", re.IGNORECASE)
# A git commit hash: 7-40 lowercase hex characters, at least one letter a-f and one digit, a
# whole word (so the digits of a 0x literal, glued to its x, never match).
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
# A chain of figures: a number (not the tail of a word or of another number), an optional unit
# word, -> or the arrow sign, then a number that is not a 0x literal.
CHAIN = re.compile(r"(?<![\w.])\d[\d,.]*(?: ?[A-Za-z%\u00b5]+)? ?(?:->|\u2192) ?(?!0[xX])\d[\d,.]*")
# Top-level folders whose paths the docs name; a token must start with one of them.
DIRS = r"(?:rtl|harness|sim|sw|tests|bench|waves|docs|scripts|examples|\.ci)"
PATH = re.compile(r"(?<![\w./<>-])(" + DIRS + r"/[A-Za-z0-9_./+<>*{}|…$-]*)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`]+)`")
MAKE = re.compile(r"(?:^|[\s;&|(])make((?:\s+\S+)*)")
PLACEHOLDER = re.compile(r"[<>*{}|…$]|\.\.\.")
# Outputs that a script writes into the tree: missing is a note, not a failure.
GENERATED = {"docs/img/loss.png": "scripts/readme_figures.sh RUN_DIR"}


def make_targets(path):
    targets = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(("\t", "#", " ")):
                continue
            m = re.match(r"^([^:=#]+):(?!=)", line)
            if m:
                for t in m.group(1).split():
                    if not t.startswith("."):
                        targets.add(t)
    return targets


def docs(root):
    out = []
    for name in ["README.md", "tests/reference/README.md"]:
        if os.path.isfile(os.path.join(root, name)):
            out.append(name)
    d = os.path.join(root, "docs")
    if os.path.isdir(d):
        out += sorted("docs/" + n for n in os.listdir(d) if n.endswith(".md"))
    return out


def exempt(rel):
    return rel.startswith(("build/", "runs/")) or PLACEHOLDER.search(rel) is not None


def make_target_of(args):
    """The target of `make ARGS`: the first word that is neither an option nor VAR=value."""
    words = re.findall(r"""(?:[^\s"']+|"[^"]*"|'[^']*')+""", args)
    for w in words:
        if w.startswith("-"):
            continue
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):
            continue
        m = re.match(r"^([a-z][a-z0-9_-]*)", w)
        return m.group(1) if m else None
    return None


targets = make_targets(os.path.join(root, "Makefile"))
failures, notes, checked = [], [], {"paths": 0, "links": 0, "make": 0}


def check_path(doc, lineno, rel, what):
    rel = rel.rstrip(".,:;)")
    if not rel or exempt(rel):
        return
    full = os.path.normpath(os.path.join(root, rel))
    if not (full == root or full.startswith(root + os.sep)):
        return  # outside the repository (e.g. ../shared/): not ours to check
    relnorm = os.path.relpath(full, root)
    if exempt(relnorm):
        return
    checked[what] += 1
    if os.path.exists(full):
        return
    if relnorm in GENERATED:
        notes.append(f"{doc}:{lineno}: note: {relnorm} is not generated yet "
                     f"({GENERATED[relnorm]})")
        return
    failures.append(f"{doc}:{lineno}: {what[:-1]} to a missing file or folder: {rel}")


def check_make(doc, lineno, text):
    for m in MAKE.finditer(text):
        t = make_target_of(m.group(1))
        if t is None:
            continue
        checked["make"] += 1
        if t not in targets:
            failures.append(f"{doc}:{lineno}: `make {t}`: no such target in the Makefile")


for doc in docs(root):
    docdir = os.path.dirname(doc)
    in_code = False
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        lines = f.read().split("\n")
    for lineno, line in enumerate(lines, 1):
        if WORD.search(line):
            failures.append(f"{doc}:{lineno}: names a work \"" + "sess" + "ion\" "
                            f"(history belongs in git log): {line.strip()[:80]}")
        for m in HASH.finditer(line):
            failures.append(f"{doc}:{lineno}: names a git commit {m.group(0)} "
                            f"(history belongs in git log; write a hex value as 0x...)")
        for m in CHAIN.finditer(line):
            failures.append(f"{doc}:{lineno}: a chain of figures \"{m.group(0).rstrip('.,')}\" "
                            f"(state today's figure; how it changed belongs in git log)")
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            check_make(doc, lineno, line)
        else:
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                target = target.split("#")[0]
                if target:
                    check_path(doc, lineno, os.path.join(docdir, target), "links")
            for m in CODE_SPAN.finditer(line):
                check_make(doc, lineno, m.group(1))
        # repository paths, in code and prose alike (links were checked above)
        text = LINK.sub(lambda m: m.group(0).split("](")[0], line) if not in_code else line
        for m in PATH.finditer(text):
            check_path(doc, lineno, m.group(1), "paths")

for n in notes:
    print(n)
if failures:
    for x in failures:
        print(x)
    print(f"docs-check: FAILED — {len(failures)} finding(s)")
    sys.exit(1)
print(f"docs-check: ok — {len(docs(root))} docs; {checked['links']} links, "
      f"{checked['paths']} repository paths, {checked['make']} make targets checked; "
      f"no work-history words, commit hashes or chains of figures")
PYTHON
