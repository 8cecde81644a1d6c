# TypeScript agents: Node.js and npm (Debian's, when missing), then the pinned
# toolchain of examples/typescript (esbuild, componentize-js, TypeScript and
# the SDK, one npm workspace) with `npm ci` from its committed lockfile.
#
# `agenthost deploy` and `agenthost dev` build a TypeScript agent with the
# esbuild and componentize-js of the project's node_modules; the TypeScript
# e2e tests (tests/e2e/typescript.rs) build the examples that way, and their
# fixtures through AGENTHOST_NODE_MODULES, exported here. Quick when the
# installed packages already match the lockfile.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "scripts/prereqs/40-node.sh: Node.js 20 or later and npm are needed (apt-get install nodejs npm)" >&2
  return 1 2>/dev/null || exit 1
fi
# `npm ci` in DIR from its lockfile, for the script named SCRIPT. npm ci wipes
# and reinstalls node_modules: skipped when the install matches the lockfile.
# Later prerequisites (45-ag-ui.sh) use it too.
agenthost_npm_ci() {
  local dir=$1 script=$2
  if cmp -s "$dir/package-lock.json" "$dir/node_modules/.package-lock.agenthost" 2>/dev/null; then
    return 0
  fi
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || {
    echo "$script: npm ci failed in $dir (is the npm registry reachable?)" >&2
    return 1
  }
  cp "$dir/package-lock.json" "$dir/node_modules/.package-lock.agenthost"
}
_examples="$(pwd)/examples/typescript"
agenthost_npm_ci "$_examples" scripts/prereqs/40-node.sh || return 1 2>/dev/null || exit 1
export AGENTHOST_NODE_MODULES="$_examples/node_modules"
unset _examples
