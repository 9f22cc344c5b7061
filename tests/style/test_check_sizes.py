#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/check-sizes.py over small C files written for the cases its
counting must get right in kproxy's style (K&R braces, functions at column
0): braces in comments, strings, character literals and #defines; tables,
struct and enum bodies that are not functions; multi-line declarators and
attributes; the "Long:" exemption with and without a reason, and with a
blank line between it and the function; the file limit; strict and report
mode's exit status.

Usage: python3 tests/style/test_check_sizes.py
"""

import importlib.util
import io
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "check-sizes.py")

spec = importlib.util.spec_from_file_location("check_sizes", TOOL)
check_sizes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_sizes)


def body(n):
    """n lines of statements."""
    return "".join("        x += %d;\n" % i for i in range(n))


def func(name, n_body, before=""):
    """A function of n_body + 3 lines (declarator, a local, the body, the
    closing brace), with before (a comment, say) right above it."""
    return before + "static int %s(int a) {\n        int x = a;\n%s}\n" % (name, body(n_body))


class Counting(unittest.TestCase):
    def found(self, text):
        return {name: (first, last, ok) for name, first, last, ok in check_sizes.functions(text)}

    def test_lines_from_declarator_to_closing_brace(self):
        text = "#include <x.h>\n\n/* what f does */\n" + func("f", 5) + "\n" + func("g", 1)
        got = self.found(text)
        self.assertEqual(got["f"][:2], (4, 11))
        self.assertEqual(got["g"][:2], (13, 16))

    def test_braces_in_comments_strings_chars_and_defines(self):
        text = ("#define OPEN {\n"
                "#define BLOCK(x) do { \\\n        x; \\\n} while (0)\n"
                "/* } a brace in a comment { */\n"
                "static const char *s = \"}{\";\n"
                "static int f(void) {\n"
                "        char c = '}';\n"
                "        const char *t = \"{ \\\" }\";   // } and {\n"
                "        /* { */\n"
                "        return c + t[0];\n"
                "}\n")
        got = self.found(text)
        self.assertEqual(list(got), ["f"])
        self.assertEqual(got["f"][:2], (7, 12))

    def test_tables_and_type_bodies_are_not_functions(self):
        text = ("struct point {\n        int x, y;\n};\n"
                "enum color { RED, GREEN };\n"
                "union u { int a; float b; };\n"
                "typedef struct { int q; } q_t;\n"
                "static const struct point table[] = {\n        {1, 2},\n        {3, 4},\n};\n"
                "static int (*const fns[])(int) = { 0 };\n"
                "int f(void) {\n        return 0;\n}\n")
        self.assertEqual(list(self.found(text)), ["f"])

    def test_multiline_declarators_and_attributes(self):
        text = ("static int log_it(const char *fmt, ...) __attribute__((format(printf, 1, 2)));\n"
                "static int\n"
                "long_params(int a,\n"
                "            int (*cb)(void *userdata, int b),\n"
                "            void *userdata) {\n"
                "        return cb(userdata, a);\n"
                "}\n"
                "const char *const *fixed(const char *table, size_t *ret_n) {\n"
                "        return 0;\n"
                "}\n"
                "static inline void freep(void *p) { free(*(void **) p); }\n")
        got = self.found(text)
        self.assertEqual(got["long_params"][:2], (2, 7))
        self.assertEqual(got["fixed"][:2], (8, 10))
        self.assertEqual(got["freep"][:2], (11, 11))
        self.assertNotIn("log_it", got)

    def test_nested_blocks_and_initialisers_inside(self):
        text = ("int f(int a) {\n"
                "        struct { int x; } s = { .x = a };\n"
                "        if (a) {\n"
                "                switch (a) {\n"
                "                case 1: { return 1; }\n"
                "                }\n"
                "        }\n"
                "        return s.x;\n"
                "}\n")
        self.assertEqual(self.found(text)["f"][:2], (1, 9))


class Limits(unittest.TestCase):
    def run_check(self, files, *args):
        """Runs the tool over files ({name: text}) in a scratch directory:
        (exit status, output lines with the directory cut)."""
        with tempfile.TemporaryDirectory() as d:
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            p = subprocess.run([sys.executable, TOOL, *args, d], capture_output=True, text=True)
            return p.returncode, [line.replace(d + os.sep, "") for line in p.stdout.splitlines()]

    def test_function_limit(self):
        # 100 lines pass, 101 do not.
        code, out = self.run_check({"a.c": func("ok", 97) + func("too_long", 98)})
        self.assertEqual(code, 1)
        self.assertEqual(out[0], "a.c:101: too_long(): 101 lines, more than 100")
        self.assertEqual(len(out), 2)       # and the summary

    def test_long_exemption_needs_a_reason(self):
        files = {
            "reason.c": func("f", 200, "/* Long: one case per field type; each needs the whole state. */\n"),
            "paragraph.c": func("g", 200, "/* Decodes things.\n *\n * Long: a state machine read top to bottom. */\n"),
            "bare.c": func("h", 200, "/* Long: */\n"),
            "gap.c": func("i", 200, "/* Long: a reason, but not right above. */\n\nint unrelated;\n"),
            "blank_line.c": func("j", 200, "/* Long: a reason. */\n\n"),
            "inside.c": "static int k(int a) {\n        /* Long: not above. */\n" + body(200) + "}\n",
        }
        code, out = self.run_check(files)
        self.assertEqual(code, 1)
        flagged = sorted(line.split(":")[0] for line in out[:-1])
        self.assertEqual(flagged, ["bare.c", "gap.c", "inside.c"])

    def test_file_limit_and_headers(self):
        code, out = self.run_check({"big.h": "int x;\n" * 801, "fine.h": "int y;\n" * 800})
        self.assertEqual(code, 1)
        self.assertEqual(out, ["big.h: 801 lines, more than 800", "1 over the size limits"])

    def test_report_mode_exits_0(self):
        code, out = self.run_check({"big.c": "int x;\n" * 900}, "--report")
        self.assertEqual(code, 0)
        self.assertEqual(out, ["big.c: 900 lines, more than 800", "1 over the size limits (report only)"])

    def test_clean_tree_is_silent(self):
        code, out = self.run_check({"a.c": func("f", 10), "b.txt": "not C\n" * 2000})
        self.assertEqual((code, out), (0, []))

    def test_limits_are_flags(self):
        code, out = self.run_check({"a.c": func("f", 10)}, "--max-function-lines", "12")
        self.assertEqual(out[0], "a.c:1: f(): 13 lines, more than 12")
        code, out = self.run_check({"a.c": "\n" * 11}, "--max-file-lines", "10")
        self.assertEqual(out[0], "a.c: 11 lines, more than 10")

    def test_unreadable_path_is_status_2(self):
        p = subprocess.run([sys.executable, TOOL, "/nonexistent/kproxy/x.c"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("check-sizes:", p.stderr)


if __name__ == "__main__":
    unittest.main()
