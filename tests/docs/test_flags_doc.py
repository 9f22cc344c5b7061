# SPDX-License-Identifier: Apache-2.0
"""docs/flags.md against the binary: its tables name every flag of
`kproxy --help` and every field `kproxy --write-config-to` writes (no
more, no fewer), and every test they cite exists.

usage: KPROXY_BUILD=build python3 tests/docs/test_flags_doc.py
"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("KPROXY_BUILD", "build")
KPROXY = os.path.join(ROOT, BUILD, "kproxy") if not os.path.isabs(BUILD) else os.path.join(BUILD, "kproxy")
DOC = os.path.join(ROOT, "docs", "flags.md")

# Fields the writer leaves out at their defaults (omitempty upstream too).
OPTIONAL_FIELDS = {"featureGates", "logging.vmodule", "logging.options.json.splitStream",
                   "logging.options.text.splitStream"}


def tables():
    """{heading: [row cells]} of the doc's tables."""
    out, heading = {}, None
    with open(DOC) as f:
        for line in f:
            if line.startswith("## "):
                heading = line[3:].strip()
            elif line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line.strip()):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                out.setdefault(heading, []).append(cells)
    # Drop each table's header row.
    return {h: rows[1:] for h, rows in out.items()}


def backticked(cell):
    return re.findall(r"`([^`]+)`", cell)


def help_flags():
    text = subprocess.run([KPROXY, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
    return set(re.findall(r"^\s+(?:-\w, )?--([a-z0-9-]+)", text, re.M))


def written_fields():
    with tempfile.NamedTemporaryFile("r", suffix=".yaml") as f:
        subprocess.run([KPROXY, "--write-config-to", f.name], check=True)
        lines = f.read().splitlines()
    fields, stack = set(), []
    for line in lines:
        m = re.match(r"^( *)([A-Za-z]+):(.*)$", line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack[depth:] = [m.group(2)]
        if m.group(3).strip():          # a leaf
            fields.add(".".join(stack))
    return fields | OPTIONAL_FIELDS


class FlagsDoc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tables = tables()
        cls.flag_rows = cls.tables["Flags"]
        cls.field_rows = cls.tables["Configuration fields without a flag"]

    def test_every_flag_once(self):
        documented = []
        for row in self.flag_rows:
            # -h and -v are shorthands of --help and --v, documented beside them.
            documented += [t[2:] for t in backticked(row[0]) if t.startswith("--")]
        flags = help_flags()
        self.assertEqual(sorted(set(documented) - flags), [], "documented flags kproxy does not have")
        self.assertEqual(sorted(flags - set(documented)), [], "flags of --help missing from docs/flags.md")
        self.assertEqual(len(documented), len(set(documented)), "a flag documented twice")

    def test_every_field(self):
        documented = set()
        for row in self.flag_rows:
            documented |= set(backticked(row[1]))
        for row in self.field_rows:
            documented |= set(backticked(row[0]))

        def covered(field):
            return field in documented or any(d.endswith(".*") and field.startswith(d[:-1]) for d in documented)
        fields = written_fields()
        self.assertEqual(sorted(f for f in fields if not covered(f)), [], "fields missing from docs/flags.md")
        stale = [d for d in documented if not d.endswith(".*") and d not in fields]
        self.assertEqual(stale, [], "documented fields kproxy does not write")

    def test_cited_tests_exist(self):
        with open(os.path.join(ROOT, "tests", "e2e", "test_e2e.py")) as f:
            e2e = set(re.findall(r"def test_(\d+[a-z]?\d*)_", f.read()))
        missing = []
        for row in self.flag_rows + self.field_rows:
            cell = row[-1]
            self.assertTrue(cell.strip(), "a row without a test: %s" % row[0])
            for ref in [r.strip() for r in cell.split(",")]:
                ok = False
                m = re.match(r"^e2e (\d+[a-z]?\d*)", ref)
                if m:
                    ok = m.group(1) in e2e
                elif ref.startswith("golden/") or ref.startswith("golden-nft/"):
                    ok = os.path.isdir(os.path.join(ROOT, "tests", ref))
                elif ref.startswith("tests/"):
                    ok = os.path.exists(os.path.join(ROOT, ref))
                elif re.match(r"^test-[\w-]+(\.sh|\.py)?$", ref):
                    base = ref
                    # tests/unit/ mirrors src/: a unit test is in its module's folder.
                    ok = (bool(glob.glob(os.path.join(ROOT, "tests", "unit", "**", base + ".c"), recursive=True)) or
                          os.path.exists(os.path.join(ROOT, "tests", "netns", base)))
                if not ok:
                    missing.append("%s: %s" % (row[0], ref))
        self.assertEqual(missing, [], "cited tests that do not exist")


if __name__ == "__main__":
    if not os.access(KPROXY, os.X_OK):
        sys.exit("no %s: build first" % KPROXY)
    unittest.main(verbosity=1)
