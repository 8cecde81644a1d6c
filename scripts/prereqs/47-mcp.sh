# The official MCP clients the MCP server tests run (tests/e2e/mcp_server.rs):
# the TypeScript SDK's (@modelcontextprotocol/sdk, pinned in
# tests/mcp/package-lock.json, installed with `npm ci`: 40-node.sh) and the
# Python SDK's (`mcp` on PyPI, pinned here, in a venv at target/venv-mcp).
# Exports AGENTHOST_MCP_CLIENTS (tests/mcp, both client scripts) and
# AGENTHOST_MCP_PYTHON. Quick when the pinned versions are installed.
_mcp_dir="$(pwd)/tests/mcp"
agenthost_npm_ci "$_mcp_dir" scripts/prereqs/47-mcp.sh || return 1 2>/dev/null || exit 1
_mcp=2.3.0
_venv="$(pwd)/target/venv-mcp"
if ! "$_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$_mcp')" 2>/dev/null; then
  # python3 with venv and pip: 20-python.sh installed them where they were missing.
  rm -rf "$_venv"
  python3 -m venv "$_venv" &&
    "$_venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$_mcp" || {
    echo "scripts/prereqs/47-mcp.sh: could not install mcp==$_mcp into $_venv (is PyPI reachable?)" >&2
    return 1 2>/dev/null || exit 1
  }
fi
export AGENTHOST_MCP_CLIENTS="$_mcp_dir"
export AGENTHOST_MCP_PYTHON="$_venv/bin/python"
unset _mcp_dir _mcp _venv
