# The AG-UI client the AG-UI e2e tests run (tests/e2e/agui.rs): the real
# @ag-ui/client HttpAgent, pinned in tests/ag-ui/package-lock.json and
# installed with `npm ci` (Node.js and npm: 40-node.sh). Quick when the
# installed packages already match the lockfile.
_agui="$(pwd)/tests/ag-ui"
if ! cmp -s "$_agui/package-lock.json" "$_agui/node_modules/.package-lock.agenthost" 2>/dev/null; then
  (cd "$_agui" && npm ci --no-audit --no-fund --loglevel=error) || {
    echo "scripts/prereqs/45-ag-ui.sh: npm ci failed in $_agui (is the npm registry reachable?)" >&2
    return 1 2>/dev/null || exit 1
  }
  cp "$_agui/package-lock.json" "$_agui/node_modules/.package-lock.agenthost"
fi
export AGENTHOST_AG_UI_CLIENT="$_agui"
unset _agui
