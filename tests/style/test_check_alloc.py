#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/check-alloc.py over small trees: raw allocator calls are counted
in code but not in comments, strings or other names (xcalloc, my_malloc,
a member ->strdup); a file over its listed count, an unlisted file with
calls, and a file under its count are each a problem; util/alloc.h is
exempt; the exit status says which.

Usage: python3 tests/style/test_check_alloc.py
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "check-alloc.py")

spec = importlib.util.spec_from_file_location("check_alloc", TOOL)
check_alloc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_alloc)


class Counting(unittest.TestCase):
    def test_calls_in_code_only(self):
        text = ('/* calloc(1, 2) in a comment */\n'
                'static const char *s = "malloc(3)";\n'
                'void f(void) {\n'
                '        char *a = malloc(4), *b = strdup("x");\n'
                '        void *c = xcalloc(1, 2), *d = my_malloc(2), *e = o->strdup(b);\n'
                '        a = realloc (a, 8);\n'
                '}\n')
        self.assertEqual(check_alloc.calls(text), 3)


class Tree(unittest.TestCase):
    def run_tool(self, files, known):
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text)
            with open(os.path.join(root, "known.txt"), "w") as f:
                f.write(known)
            p = subprocess.run([sys.executable, TOOL, "--root", root, "--known", os.path.join(root, "known.txt")],
                               stdout=subprocess.PIPE, text=True)
            return p.returncode, p.stdout

    TWO = "void f(void) { char *a = malloc(1); char *b = strdup(a); }\n"

    def test_listed_counts_pass(self):
        rc, out = self.run_tool({"src/a.c": self.TWO, "src/util/alloc.h": "void *x = malloc(1);\n"},
                                "# comment\nsrc/a.c 2\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("2 raw allocator calls in 1 files left, 0 problems", out)

    def test_more_than_listed_fails(self):
        rc, out = self.run_tool({"src/a.c": self.TWO, "src/b.c": "void *g(void) { return calloc(1, 1); }\n"},
                                "src/a.c 1\n")
        self.assertEqual(rc, 1)
        self.assertIn("src/a.c: 2 calls of", out)
        self.assertIn("src/b.c: 1 calls of", out)

    def test_fewer_than_listed_fails_until_lowered(self):
        rc, out = self.run_tool({"src/a.c": "void f(void) {}\n"}, "src/a.c 2\n")
        self.assertEqual(rc, 1)
        self.assertIn("alloc-known.txt says 2: lower it", out)

    def test_bad_list_cannot_run(self):
        rc, _ = self.run_tool({"src/a.c": self.TWO}, "src/a.c two\n")
        self.assertEqual(rc, 2)


if __name__ == "__main__":
    unittest.main()
