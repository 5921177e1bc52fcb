#!/usr/bin/env python3
"""Checks the relative links of the project's Markdown pages: every [text](path) and
[text](path#anchor) and [text](#anchor) must name a file of the repository and, for a Markdown
file, a heading of it (anchors as GitHub makes them: lower case, punctuation dropped, spaces
to '-', a repeated heading's anchor suffixed -1, -2, ...). Links into code blocks and web
addresses are not checked.

  tools/check_doc_links.py [repository root, default: this script's repository] [FILE.md ...]

Without files, checks every .md below the root but in hidden folders, build folders (build*)
and the GPU bundle. Prints each broken link as file:line and exits 1 when there is one.
"""
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchor_of(heading):
    text = re.sub(r"`([^`]*)`", r"\1", heading)  # code spans keep their text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep theirs
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}  # path -> the anchors of its headings


def anchors(path):
    if path not in _anchors:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read()):
                m = HEADING.match(line)
                if not m:
                    continue
                base = anchor_of(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        _anchors[path] = found
    return _anchors[path]


def markdown_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs
                         if not d.startswith((".", "build")) and d != "gpu-bundle")
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def broken_links(path, root):
    problems = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, line in prose_lines(text):
        for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                        if file_part else path)
            where = f"{os.path.relpath(path, root)}:{number}"
            if not os.path.exists(resolved):
                problems.append(f"{where}: '{target}': no such file")
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                problems.append(f"{where}: '{target}': no heading with anchor '#{anchor}' in "
                                f"{os.path.relpath(resolved, root)}")
    return problems


def main(argv):
    default_root = os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(argv[1] if len(argv) > 1 else default_root)
    files = [os.path.abspath(f) for f in argv[2:]] or list(markdown_files(root))
    problems = [p for f in files for p in broken_links(f, root)]
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"doc links: {len(files)} Markdown files checked, every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
