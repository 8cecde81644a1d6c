# Python agents: componentize-py (pinned), in a venv at target/venv.
#
# `agenthost deploy` and `agenthost dev` build a Python agent with
# componentize-py; the Python e2e tests (tests/e2e/python.rs) build theirs the
# same way. Both find it through AGENTHOST_COMPONENTIZE_PY, exported here.
# Quick when the pinned version is already installed.
AGENTHOST_COMPONENTIZE_PY_VERSION=0.25.1
_venv="$(pwd)/target/venv"
if ! "$_venv/bin/componentize-py" --version 2>/dev/null | grep -qF "$AGENTHOST_COMPONENTIZE_PY_VERSION"; then
  _python=$(command -v python3 || true)
  # Debian's python3 comes without venv and pip: install them as root.
  if { [ -z "$_python" ] || ! "$_python" -c 'import venv, ensurepip' 2>/dev/null; } &&
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
    _python=$(command -v python3 || true)
  fi
  if [ -z "$_python" ]; then
    echo "scripts/prereqs/20-python.sh: python3 (3.9 or later, with venv and pip) is needed to install componentize-py" >&2
    return 1 2>/dev/null || exit 1
  fi
  rm -rf "$_venv"
  "$_python" -m venv "$_venv" &&
    "$_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "componentize-py==$AGENTHOST_COMPONENTIZE_PY_VERSION" || {
    echo "scripts/prereqs/20-python.sh: could not install componentize-py==$AGENTHOST_COMPONENTIZE_PY_VERSION into $_venv (is PyPI reachable?)" >&2
    return 1 2>/dev/null || exit 1
  }
fi
export AGENTHOST_COMPONENTIZE_PY="$_venv/bin/componentize-py"
unset _venv _python
