#!/usr/bin/env bash
# Set up (a venv in .venv with the package, its mcp extra and the demo's packages) and open JupyterLab on the
# demo notebook. `--setup-only` sets up and stops (tests/test_newcomer.py); other arguments go to JupyterLab.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# the demo extra is what binder/demo.ipynb imports (binder/postBuild installs the same extra)
.venv/bin/python -m pip install --quiet -e '.[mcp,demo]' 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import shiro_kernel, mcp, pandas, matplotlib" # fail loudly if the install did not work
# the demo's turns are recorded in it; trusting this repository's own demo lets them replay without a key
.venv/bin/jupyter trust binder/demo.ipynb >/dev/null 2>&1 || true
if [ "${1:-}" = "--setup-only" ]; then
  exit 0
fi
# JupyterLab refuses to start as root (a container's usual user) unless told it may
ROOT=()
if [ "$(id -u)" -eq 0 ]; then
  echo "running as root: starting JupyterLab with --allow-root" >&2
  ROOT=(--allow-root)
fi
exec .venv/bin/jupyter lab binder/demo.ipynb "${ROOT[@]}" "$@"
