#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/layers.py on small trees of its own: what it must find (a circle,
an include back up, an extern, a module on no floor, a known circle that is
gone) and what it must let pass."""
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "layers.py")


def check(files, conf):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src")
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(src, path)), exist_ok=True)
            with open(os.path.join(src, path), "w") as f:
                f.write(text)
        with open(os.path.join(d, "layers.conf"), "w") as f:
            f.write(conf)
        p = subprocess.run([sys.executable, TOOL, "--conf", os.path.join(d, "layers.conf"), src],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


CONF = "top/*\nlow/*\n"


class Layers(unittest.TestCase):
    def test_a_clean_tree_passes(self):
        rc, out = check({"top/a.c": '#include "top/a.h"\n#include "low/b.h"\n', "top/a.h": "",
                         "low/b.c": '#include "low/b.h"\n', "low/b.h": ""}, CONF)
        self.assertEqual(rc, 0, out)

    def test_an_include_back_up_fails(self):
        rc, out = check({"top/a.h": "", "low/b.c": '#include "top/a.h"\n'}, CONF)
        self.assertEqual(rc, 1)
        self.assertIn("low/b -> top/a: an arrow back up", out)

    def test_a_circle_on_one_floor_fails(self):
        rc, out = check({"low/a.c": '#include "low/b.h"\n', "low/a.h": "",
                         "low/b.c": '#include "low/a.h"\n', "low/b.h": ""}, CONF)
        self.assertEqual(rc, 1)
        self.assertIn("a circle: low/a low/b", out)

    def test_a_known_circle_is_reported_and_one_gone_fails(self):
        files = {"low/a.c": '#include "low/b.h"\n', "low/a.h": "", "low/b.c": '#include "low/a.h"\n', "low/b.h": ""}
        rc, out = check(files, CONF + "[known circles]\nlow/a low/b\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("known circle (issue 34): low/a low/b", out)
        files["low/b.c"] = ""
        rc, out = check(files, CONF + "[known circles]\nlow/a low/b\n")
        self.assertEqual(rc, 1)
        self.assertIn("known circle gone", out)

    def test_an_extern_and_a_module_on_no_floor_fail(self):
        rc, out = check({"low/a.c": "extern int b_count;\n", "other/c.c": ""}, CONF)
        self.assertEqual(rc, 1)
        self.assertIn("low/a.c: extern int b_count;: declares something extern", out)
        self.assertIn("other/c: on no floor", out)


if __name__ == "__main__":
    unittest.main()
