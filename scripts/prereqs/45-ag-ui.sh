# The AG-UI client the AG-UI e2e tests run (tests/e2e/agui.rs): the real
# @ag-ui/client HttpAgent, pinned in tests/ag-ui/package-lock.json and
# installed with `npm ci` (Node.js, npm and `agenthost_npm_ci`: 40-node.sh). Quick when the
# installed packages already match the lockfile.
_agui="$(pwd)/tests/ag-ui"
agenthost_npm_ci "$_agui" scripts/prereqs/45-ag-ui.sh || return 1 2>/dev/null || exit 1
export AGENTHOST_AG_UI_CLIENT="$_agui"
unset _agui
