# schemathesis (pinned), in a venv at target/venv-schemathesis: the "api fuzz"
# phase of scripts/test (tests/e2e/api_fuzz.rs) runs it against a live
# server and its GET /openapi.json. Exports AGENTHOST_SCHEMATHESIS.
# Quick when the pinned version is already installed.
AGENTHOST_SCHEMATHESIS_VERSION=4.32.5
_venv="$(pwd)/target/venv-schemathesis"
if ! "$_venv/bin/st" --version 2>/dev/null | grep -qF "$AGENTHOST_SCHEMATHESIS_VERSION"; then
  # python3 with venv and pip: 20-python.sh installed them where they were missing.
  rm -rf "$_venv"
  python3 -m venv "$_venv" &&
    "$_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "schemathesis==$AGENTHOST_SCHEMATHESIS_VERSION" || {
    echo "scripts/prereqs/50-schemathesis.sh: could not install schemathesis==$AGENTHOST_SCHEMATHESIS_VERSION into $_venv (is PyPI reachable?)" >&2
    return 1 2>/dev/null || exit 1
  }
fi
export AGENTHOST_SCHEMATHESIS="$_venv/bin/st"
unset _venv
