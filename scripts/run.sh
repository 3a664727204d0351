#!/usr/bin/env bash
# Set up (a venv in .venv with the package) and open JupyterLab on the demo notebook.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet -e '.[mcp]' 2>&1 | grep -v "is ignored" || true
# the demo's turns are recorded in it; trusting this repository's own demo lets them replay without a key
.venv/bin/jupyter trust binder/demo.ipynb >/dev/null 2>&1 || true
exec .venv/bin/jupyter lab binder/demo.ipynb "$@"
