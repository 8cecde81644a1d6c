# The console's browser test (tests/e2e/console.rs) drives Debian's Chromium
# through its chromedriver (a browser download is not possible here). Installs
# both from the same Debian release when either is missing (they must match),
# and exports where they are.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/prereqs/30-chromium.sh: install Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
AGENTHOST_TEST_CHROMIUM=$(command -v chromium)
AGENTHOST_TEST_CHROMEDRIVER=$(command -v chromedriver)
export AGENTHOST_TEST_CHROMIUM AGENTHOST_TEST_CHROMEDRIVER
