#!/usr/bin/env bash
# ctest runs each Catch2 test case by its name (catch_discover_tests): a ';' in a name splits it
# (CMake's list separator) and a leading '-' reads as an option, and either way the case silently
# never runs. Fails naming every such TEST_CASE, including names continued over several lines.
# Usage: tools/check_test_names.sh [source dir]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
python3 - "$root/tests" <<'PY'
import pathlib, re, sys
bad = []
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.cpp")):
    text = path.read_text()
    for m in re.finditer(r'TEST_CASE\(\s*((?:"[^"]*"\s*)+)', text):
        name = "".join(re.findall(r'"([^"]*)"', m.group(1)))
        if ";" in name or name.startswith("-"):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path}:{line}: {name}")
if bad:
    print("test case names ctest cannot run (no ';', no leading '-'):")
    print("\n".join(bad))
    sys.exit(1)
PY
