# PyJWT and cryptography (pinned), in a venv at target/venv-idp: the local
# identity provider of the end-user tests (tests/end-users/idp.py) signs
# JWTs with them and serves their JWKS over HTTP. Exports
# AGENTHOST_TEST_IDP_PYTHON. Quick when the pinned versions are installed.
_pyjwt=2.10.1
_cryptography=44.0.3
_venv="$(pwd)/target/venv-idp"
if ! "$_venv/bin/python" -c "import jwt, cryptography, sys; sys.exit(jwt.__version__ != '$_pyjwt' or cryptography.__version__ != '$_cryptography')" 2>/dev/null; then
  # python3 with venv and pip: 20-python.sh installed them where they were missing.
  rm -rf "$_venv"
  python3 -m venv "$_venv" &&
    "$_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "PyJWT==$_pyjwt" "cryptography==$_cryptography" || {
    echo "scripts/prereqs/55-idp.sh: could not install PyJWT==$_pyjwt and cryptography==$_cryptography into $_venv (is PyPI reachable?)" >&2
    return 1 2>/dev/null || exit 1
  }
fi
export AGENTHOST_TEST_IDP_PYTHON="$_venv/bin/python"
unset _venv _pyjwt _cryptography
