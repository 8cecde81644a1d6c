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
# CPython before 3.11.8 and 3.12.2 (this machine's 3.11.7 and Debian's 3.11
# among them) keeps `ast.parse`'s recursion count in interpreter-wide state,
# so two threads parsing at once can fail with "SystemError: AST constructor
# recursion depth mismatch" (python/cpython#106905). schemathesis' two
# workers do exactly that when hypothesis describes a filter's lambda. A
# module loaded by a .pth in this venv only serialises `ast.parse` across
# threads; reproduced and checked with two threads on 3.11.7.
"$_venv/bin/python" - <<'PY'
import pathlib, site
packages = pathlib.Path(site.getsitepackages()[0])
(packages / "agenthost_recursion.pth").unlink(missing_ok=True)  # an earlier, wrong guess
(packages / "agenthost_ast_lock.py").write_text(
    '"""Serialise ast.parse across threads (python/cpython#106905)."""\n'
    "import ast, functools, threading\n"
    "_lock = threading.RLock()\n"
    "_parse = ast.parse\n"
    "@functools.wraps(_parse)\n"
    "def parse(*args, **kwargs):\n"
    "    with _lock:\n"
    "        return _parse(*args, **kwargs)\n"
    "ast.parse = parse\n"
)
(packages / "agenthost_ast_lock.pth").write_text("import agenthost_ast_lock\n")
PY
export AGENTHOST_SCHEMATHESIS="$_venv/bin/st"
unset _venv
