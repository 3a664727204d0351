#!/usr/bin/env bash
# Run the fault suite and write docs/reliability.md from its figures.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || ./scripts/test.sh --co -q >/dev/null
SHIRO_RELIABILITY_DOC="$PWD/docs/reliability.md" .venv/bin/python -m pytest -q \
  tests/test_faults.py tests/test_turn_limits.py tests/provider/test_client.py
cat docs/reliability.md
