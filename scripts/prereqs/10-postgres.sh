# PostgreSQL 15 (Debian's): the tests start their own cluster with its
# initdb and postgres, as the unprivileged `postgres` account when root.
if ! command -v pg_config >/dev/null || [ ! -x "$(pg_config --bindir)/initdb" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing PostgreSQL with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "the tests need PostgreSQL's server binaries: apt-get install postgresql" >&2
    exit 1
  fi
fi
AGENTHOST_TEST_PG_BINDIR="$(pg_config --bindir)"
export AGENTHOST_TEST_PG_BINDIR
