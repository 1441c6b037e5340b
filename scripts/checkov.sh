#!/usr/bin/env bash
# Checkov on the Bicep templates (bicep/), in a virtualenv of its own: Checkov pins versions
# that clash with the test stack. Fails on any failed check and on any file Checkov could
# not parse (it would otherwise skip that file silently). Skips are justified inline in the
# Bicep with `// checkov:skip=CKV_...: reason` inside the resource they apply to.
set -euo pipefail
cd "$(dirname "$0")/.."

CHECKOV_VERSION=3.3.30
# Checkov 3.3.30 pins the Bicep parser pycep-parser 0.5.1, which cannot read the Microsoft
# Graph extension (`extension microsoftGraphV1`), cidrSubnet() or flatten(): every file
# using them would be a parsing error. 0.7.1 reads them; the tests parse with it too
# (pyproject.toml), and Checkov runs its checks unchanged on its trees.
PYCEP_VERSION=0.7.1
VENV=${CHECKOV_VENV:-.venv-checkov}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

if [ "$("$VENV/bin/checkov" --version 2>/dev/null || true)" != "$CHECKOV_VERSION" ] ||
    ! "$VENV/bin/python" -m pip show pycep-parser 2>/dev/null | grep -qx "Version: $PYCEP_VERSION"; then
    "$PYTHON" -m venv "$VENV"
    # With the project's uv (make install) when there is one: the same versions as pip's,
    # in a fifth of the time (pip took 2 min 14 s here, uv 28 s).
    if [ -x .venv/bin/uv ]; then
        install=(.venv/bin/uv pip install -q --python "$VENV/bin/python")
    else
        install=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
    fi
    "${install[@]}" "checkov==$CHECKOV_VERSION"
    "${install[@]}" --no-deps "pycep-parser==$PYCEP_VERSION"
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# --skip-download: nothing is fetched from the vendor's platform (no network needed).
status=0
"$VENV/bin/checkov" --framework bicep --directory bicep --compact --quiet --skip-download \
    --output cli --output json --output-file-path "console,$out/results.json" || status=$?

"$VENV/bin/python" - "$out/results.json" <<'PY'
import json
import sys

data = json.load(open(sys.argv[1]))
reports = data if isinstance(data, list) else [data]
summary = next(r["summary"] for r in reports if r.get("check_type") == "bicep")
print(
    "checkov bicep: {passed} passed, {failed} failed, {skipped} skipped, "
    "{parsing_errors} parsing errors, {resource_count} resources".format(**summary)
)
if summary["parsing_errors"] or not summary["resource_count"]:
    sys.exit("checkov could not parse every Bicep file")
if summary["failed"]:
    sys.exit(1)
PY
exit "$status"
