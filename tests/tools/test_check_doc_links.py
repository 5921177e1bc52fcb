#!/usr/bin/env python3
"""tools/check_doc_links.py on a tree of pages made by hand: the links it must accept (files,
headings with code spans and punctuation, a repeated heading's suffix, a page's own anchors,
web addresses, links inside code) and the ones it must refuse, each named by file and line.
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "check_doc_links.py")

README = """# Project

## Training with `purine train`
## Notes
## Notes

Good: [a](#training-with-purine-train), [b](#notes-1), [c](docs/GUIDE.md#a-guide-step-1),
[d](docs/GUIDE.md), [e](https://example.org/#nowhere), `[f](#in-a-code-span)`.
```
[g](#in-a-code-block)
```
Bad: [h](#notes-2), [i](docs/MISSING.md).
"""
GUIDE = """# A guide: step 1

Back to the [README](../README.md#project), [wrongly](../README.md#training).
"""


def run(root, *files):
    return subprocess.run([sys.executable, SCRIPT, root, *files], capture_output=True, text=True)


class CheckDocLinks(unittest.TestCase):
    def test_good_and_bad_links(self):
        with tempfile.TemporaryDirectory() as root:
            os.mkdir(os.path.join(root, "docs"))
            with open(os.path.join(root, "README.md"), "w") as f:
                f.write(README)
            with open(os.path.join(root, "docs", "GUIDE.md"), "w") as f:
                f.write(GUIDE)
            result = run(root)
            self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
            self.assertEqual(
                result.stdout.splitlines(),
                [
                    "README.md:12: '#notes-2': no heading with anchor '#notes-2' in README.md",
                    "README.md:12: 'docs/MISSING.md': no such file",
                    "docs/GUIDE.md:3: '../README.md#training': no heading with anchor "
                    "'#training' in README.md",
                ],
            )
            # The good page alone passes.
            with open(os.path.join(root, "README.md"), "w") as f:
                f.write(README.split("Bad:")[0])
            result = run(root, os.path.join(root, "README.md"))
            self.assertEqual(result.returncode, 0, result.stdout)
            self.assertIn("1 Markdown files checked", result.stdout)


if __name__ == "__main__":
    unittest.main()
