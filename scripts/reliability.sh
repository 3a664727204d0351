#!/usr/bin/env bash
# Run the fault suite and write docs/reliability.md from its figures.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || ./scripts/test.sh --co -q >/dev/null
SHIRO_RELIABILITY_DOC="$PWD/docs/reliability.md" .venv/bin/python -m pytest -q \
  tests/test_faults.py tests/test_faults_first_contact.py tests/test_turn_limits.py tests/provider/test_client.py \
  tests/memory/test_memory_approval.py tests/mcp/test_mcp_consent.py tests/mcp/test_mcp_security_notebook.py tests/mcp/test_mcp_agent.py \
  tests/store/test_permissions.py tests/test_redact.py tests/ui/test_sanitize.py tests/browser/test_security.py \
  tests/ui/test_number_marks.py tests/browser/test_security_untrusted.py \
  tests/notebook/test_cells_guards.py tests/browser/test_lab_windows.py \
  tests/context/test_instructions.py tests/rerun/test_replay_trust_kernel.py tests/cli/test_notebooks_cli.py \
  tests/provider/test_first_contact.py tests/provider/test_boundary.py tests/tools/test_tool_traits.py \
  tests/ui/test_undo_buttons.py tests/browser/test_lab_undo.py tests/undo/test_undo_kernel.py \
  tests/undo/test_undo_keeps_yours.py tests/provider/test_profile_unlearn.py tests/test_stream_interrupted.py tests/undo/test_undo_code_files.py \
  tests/test_policy.py tests/private/test_private_routes.py tests/private/test_schema_only.py tests/egress/test_ledger.py
cat docs/reliability.md
