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
# CPython before 3.11.8 and 3.12.1 (this machine's and Debian's 3.11 among
# them) can fail `ast.parse` deep in a call stack with "SystemError: AST
# constructor recursion depth mismatch" (python/cpython#106905), which
# schemathesis' generator (hypothesis describing its filters) runs into now
# and then: a higher recursion limit in the venv keeps the parse under it.
"$_venv/bin/python" - <<'PY'
import pathlib, site
pathlib.Path(site.getsitepackages()[0], "agenthost_recursion.pth").write_text(
    "import sys; sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))\n"
)
PY
export AGENTHOST_SCHEMATHESIS="$_venv/bin/st"
unset _venv
