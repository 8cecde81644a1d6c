# openssl (Debian's): the PostgreSQL TLS tests (tests/e2e/pg_tls.rs) make
# their test CA and certificates with it.
if ! command -v openssl >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing openssl with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
  else
    echo "the tests need openssl: apt-get install openssl" >&2
    exit 1
  fi
fi
