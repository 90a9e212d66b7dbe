#!/usr/bin/env python3
"""The longest functions of Scratchformer's own C++ code (autograd, nn, data, train).

    tools/function_lengths.py                 # the 10 longest, with file:line
    tools/function_lengths.py --top 5
    tools/function_lengths.py --max 80        # exit status 1 if any function is longer (a test)

A function is counted from the line its signature starts on to its closing brace, blank lines
and comments included (what a reader scrolls through). Lambdas and local classes count as part
of the function around them; functions defined inside a class body count on their own. The
parser is a brace counter over the code with comments, strings and character literals removed:
good enough for this code base, which has no macros that open or close braces.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ["autograd", "nn", "data", "train"]
NOT_A_FUNCTION = re.compile(r"^\s*(template\s*<.*>\s*)?(class|struct|union|enum|namespace|extern)\b")


def strip_code(text):
    """Comments, string and char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):  # raw string R"delim( ... )delim"
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, last line) of every function defined in the file."""
    code = strip_code(open(path, encoding="utf-8").read())
    found = []
    stack = []  # per open brace: "function", "scope" (class, namespace, ...) or "inner"
    head_start = 0  # where the text before the next brace began
    line_of = lambda pos: code.count("\n", 0, pos) + 1
    for pos, c in enumerate(code):
        if c in ";":
            if not stack or stack[-1] == "scope":
                head_start = pos + 1
        elif c == "{":
            head = code[head_start:pos]
            if stack and stack[-1] != "scope":
                stack.append("inner")
            elif ")" in head and not NOT_A_FUNCTION.match(head) and not re.search(r"=\s*$", head.strip()):
                name = re.findall(r"([~\w:]+(?:operator\s*\S+)?)\s*\(", head)
                first = line_of(head_start + len(head) - len(head.lstrip()))
                stack.append(("function", name[0] if name else "?", first))
            else:
                stack.append("scope")
            head_start = pos + 1
        elif c == "}":
            top = stack.pop() if stack else "scope"
            if isinstance(top, tuple):
                found.append((top[1], top[2], line_of(pos)))
            if not stack or stack[-1] == "scope":
                head_start = pos + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", type=int, default=10, help="how many of the longest to print (default 10)")
    ap.add_argument("--max", type=int, default=0, help="fail (exit 1) if a function has more lines than this")
    args = ap.parse_args()
    rows = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(names):
                if name.endswith((".cpp", ".h")):
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, ROOT)
                    rows += [(last - first + 1, f"{rel}:{first}", fn) for fn, first, last in functions(path)]
    rows.sort(key=lambda r: -r[0])
    for lines, where, fn in rows[: args.top]:
        print(f"{lines:5d}  {where:45s} {fn}")
    if args.max:
        over = [r for r in rows if r[0] > args.max]
        for lines, where, fn in over:
            print(f"function_lengths: {where} {fn} has {lines} lines, more than {args.max}", file=sys.stderr)
        if over:
            return 1
        print(f"function_lengths: all {len(rows)} functions have at most {args.max} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
