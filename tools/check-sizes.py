#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the house style's size limits over kproxy's C sources: no file
longer than 800 lines, no function longer than 100 lines unless a comment
right above it says why.

Usage:
    tools/check-sizes.py [--report] [--max-file-lines N] [--max-function-lines N] [PATH...]

PATH is a file or a directory searched for *.c and *.h (default: src/ of
the tree this script sits in). Each offender is one line, as a compiler
prints a diagnostic:

    src/kube/decode.c: 850 lines, more than 800
    src/config/config-decode.c:394: decode_value(): 171 lines, more than 100

Strict by default: the exit status is 1 when anything is over its limit.
--report prints the same lines and exits 0, for while files are being
split; tests/run-all.sh runs it that way until the lead drops the flag.
2 means the check itself could not run (an unreadable file, bad usage).

How lines are counted. A file's lines are its newline-terminated lines.
A function runs from the first line of its declarator (where its return
type starts, at column 0 in kproxy's K&R style) to the line of its closing
brace, both included; the comment above it is not counted. Functions are
found by reading the code, not its layout: comments, string and character
literals and preprocessor lines (a #define's braces included) are blanked
first, then each brace at file scope opens a function when the text before
it, back to the previous ';', '}' or directive, ends with a parameter list
and holds no '=' outside parentheses (so initialisers, struct, union and
enum bodies are not functions).

The exemption. A function longer than the limit passes when the comment
ending right above it (nothing but blank space between the two) has a
line that starts with "Long:" and gives the reason after it, e.g.

    /* Long: one case per field type of the table above; split, the
     * cases would each need the decoder's whole state. */
    static int decode_value(...) {

or as the last paragraph of the function's own comment:

    /* Decodes one field.
     *
     * Long: ... */

"Long:" alone, with no reason after it, does not count.
"""

import argparse
import os
import re
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100

# "Long:" and at least one word of reason, at the start of a comment line.
LONG_RE = re.compile(r"^\s*(?:/\*+|\*+)?\s*Long:\s*\w")


def blank_code(text):
    """text with comments, string and character literals and preprocessor
    lines replaced by spaces, newlines kept, so that offsets and line
    numbers still match. Also returns the comments as (start, end) offsets."""
    out = list(text)
    comments = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if at_line_start and c in " \t":
            i += 1
            continue
        if at_line_start and c == "#":
            # A directive runs to an unescaped newline; comments inside it
            # are part of it.
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                if text.startswith("/*", j):
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        at_line_start = False
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            comments.append((i, end))
            for k in range(i, end):
                if out[k] != "\n":
                    out[k] = " "
            i = end
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            comments.append((i, end))
            for k in range(i, end):
                out[k] = " "
            i = end
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        i += 1
    return "".join(out), comments


def strip_trailing_attributes(header):
    """header without trailing __attribute__((...)) groups."""
    h = header.rstrip()
    while h.endswith(")"):
        k = matching_open(h)
        before = h[:k].rstrip() if k >= 0 else ""
        if not before.endswith("__attribute__"):
            break
        h = before[: -len("__attribute__")].rstrip()
    return h


def matching_open(h):
    """The offset of the '(' that the ')' ending h closes, or -1."""
    depth = 0
    for k in range(len(h) - 1, -1, -1):
        if h[k] == ")":
            depth += 1
        elif h[k] == "(":
            depth -= 1
            if depth == 0:
                return k
    return -1


def function_name(header):
    """The declared name: the identifier before the outermost parameter
    list that ends the header; "" when there is none."""
    h = strip_trailing_attributes(header)
    if not h.endswith(")"):
        return ""
    k = matching_open(h)
    if k < 0:
        return ""
    m = re.search(r"([A-Za-z_]\w*)\s*$", h[:k])
    return m.group(1) if m else ""


def is_function_header(header):
    h = strip_trailing_attributes(" ".join(header.split()))
    if not h or not h.endswith(")"):
        return False
    depth = 0
    for ch in h:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "=" and depth == 0:
            return False
    if re.match(r"^(typedef\s+)?(struct|union|enum)\b[^(]*$", h):
        return False
    return bool(function_name(h))


def functions(text):
    """(name, first line, last line, exempt) of each function defined in text."""
    code, comments = blank_code(text)
    line_starts = [0]
    for m in re.finditer("\n", text):
        line_starts.append(m.end())

    def line_of(offset):
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    found = []
    depth = 0
    item_start = 0          # offset after the previous file-scope terminator
    open_at = None
    header = None
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                open_at = i
                header = code[item_start:i]
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                depth = 0   # unbalanced input: start over rather than fail
            if depth == 0 and open_at is not None:
                if is_function_header(header):
                    skip = len(header) - len(header.lstrip())
                    start = item_start + skip
                    found.append((function_name(" ".join(header.split())), line_of(start), line_of(i),
                                  exempt(text, comments, start)))
                open_at = None
                item_start = i + 1
        elif c == ";" and depth == 0:
            item_start = i + 1
    return found


def exempt(text, comments, start):
    """Whether the comment ending right above offset start gives a Long: reason."""
    for (cs, ce) in reversed(comments):
        if ce > start:
            continue
        if text[ce:start].strip():
            return False
        return any(LONG_RE.match(line) for line in text[cs:ce].splitlines())
    return False


def source_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith((".c", ".h")):
                        yield os.path.join(root, f)
        else:
            yield p


def check(paths, max_file, max_function, out):
    """Writes one line per offender to out; returns how many there were."""
    bad = 0
    for path in source_files(paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if n > max_file:
            out.write("%s: %d lines, more than %d\n" % (path, n, max_file))
            bad += 1
        for name, first, last, ok in functions(text):
            length = last - first + 1
            if length > max_function and not ok:
                out.write("%s:%d: %s(): %d lines, more than %d\n" % (path, first, name, length, max_function))
                bad += 1
    return bad


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", action="store_true", help="print the offenders but exit 0")
    ap.add_argument("--max-file-lines", type=int, default=MAX_FILE_LINES)
    ap.add_argument("--max-function-lines", type=int, default=MAX_FUNCTION_LINES)
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args(argv)
    src = os.path.normpath(os.path.join(here, "..", "src"))
    if not os.path.relpath(src).startswith(".."):
        src = os.path.relpath(src)
    paths = args.paths or [src]
    try:
        bad = check(paths, args.max_file_lines, args.max_function_lines, sys.stdout)
    except OSError as e:
        print("check-sizes: %s" % e, file=sys.stderr)
        return 2
    if bad:
        print("%d over the size limits%s" % (bad, " (report only)" if args.report else ""))
    return 0 if args.report or bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
