# The Standard Webhooks reference library (pinned), in a venv at
# target/venv-webhooks: the webhook receiver of the e2e tests
# (tests/webhooks/receiver.py) verifies every delivery with it. Exports
# AGENTHOST_TEST_WEBHOOKS_PYTHON. Quick when the pinned version is installed.
_standardwebhooks=1.1.0
_venv="$(pwd)/target/venv-webhooks"
if ! "$_venv/bin/python" -c "import importlib.metadata as m, standardwebhooks, sys; sys.exit(m.version('standardwebhooks') != '$_standardwebhooks')" 2>/dev/null; then
  # python3 with venv and pip: 20-python.sh installed them where they were missing.
  rm -rf "$_venv"
  python3 -m venv "$_venv" &&
    "$_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "standardwebhooks==$_standardwebhooks" || {
    echo "scripts/prereqs/56-webhooks.sh: could not install standardwebhooks==$_standardwebhooks into $_venv (is PyPI reachable?)" >&2
    return 1 2>/dev/null || exit 1
  }
fi
export AGENTHOST_TEST_WEBHOOKS_PYTHON="$_venv/bin/python"
unset _venv _standardwebhooks
