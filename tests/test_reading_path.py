#!/usr/bin/env python3
"""The reading path names functions that are there.

    tests/test_reading_path.py                        # docs/read-the-code.md and its zh-CN version
    tests/test_reading_path.py docs/read-the-code.md  # one document

docs/read-the-code.md (made by tools/reading_path.py --markdown) lists one training step as
entries `file:line  name`. For each entry this checks that the file exists, that it has that
line, and that the function's own name (the last part of `name`: `backward` for
`sf::Tensor::backward`, `Tensor` for a constructor or destructor, `[` for a lambda) appears on
that line or within NEAR lines of it. Exit status 1, one line per stale entry, when any is stale:
the code moved, so the page wants regenerating. No build, no compiler: a few milliseconds.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["docs/read-the-code.md", "docs/read-the-code.zh-CN.md"]
NEAR = 3  # lines either side: a signature may wrap, a template<> line may come first
ENTRY = re.compile(r"`((?:autograd|nn|data|train)/[\w./-]+):(\d+)\s+([^`]+?)`")


def own_name(name):
    """What the source must show near the line: sf::nn::Linear::forward -> forward."""
    last = re.split(r"::(?![^<]*>)", name)[-1]
    if re.fullmatch(r"\{lambda#\d+\}", last):
        return "["  # a lambda's introducer
    if last.startswith("operator"):
        return "operator"
    return re.sub(r"<.*", "", last).lstrip("~")


def check(doc):
    """(entries checked, [problems]) for one document."""
    path = os.path.join(ROOT, doc)
    problems, entries, sources = [], 0, {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for doc_line, text in enumerate(lines, 1):
        for file, line, name in ENTRY.findall(text):
            entries += 1
            line = int(line)
            where = f"{doc}:{doc_line}: {file}:{line}  {name}"
            src = os.path.join(ROOT, file)
            if not os.path.isfile(src):
                problems.append(f"{where}: no file {file}")
                continue
            if src not in sources:
                with open(src, encoding="utf-8") as s:
                    sources[src] = s.read().split("\n")
            code = sources[src]
            if not 1 <= line <= len(code):
                problems.append(f"{where}: {file} has {len(code)} lines")
                continue
            want = own_name(name)
            window = code[max(0, line - 1 - NEAR):line + NEAR]
            if not any(want in w for w in window):
                problems.append(f"{where}: '{want}' is not within {NEAR} lines of line {line}")
    return entries, problems


def main():
    docs = sys.argv[1:] or [d for d in DOCS if os.path.exists(os.path.join(ROOT, d))]
    if not docs:
        print(f"test_reading_path: none of {', '.join(DOCS)} exists", file=sys.stderr)
        return 1
    failed = False
    for doc in docs:
        entries, problems = check(doc)
        for p in problems:
            print(p, file=sys.stderr)
        if entries == 0:
            print(f"{doc}: no `file:line  name` entries found", file=sys.stderr)
            failed = True
        elif problems:
            print(f"{doc}: {len(problems)} of {entries} entries are stale: regenerate the page "
                  "(tools/reading_path.py --markdown, see its top)", file=sys.stderr)
            failed = True
        else:
            print(f"{doc}: all {entries} entries name a function at its line")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
