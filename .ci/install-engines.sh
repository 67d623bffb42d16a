#!/usr/bin/env bash
# Install the system packages that sqlnb's engine tests need on Debian/Ubuntu:
#
#   * PostgreSQL server binaries (Debian package ``postgresql``; they land in
#     /usr/lib/postgresql/<ver>/bin, where tests/support/postgres.py finds them).
#     No cluster is created and no service is started: the tests run their own
#     throw-away server in a temporary directory.
#   * A Java runtime for pyspark (``default-jre-headless``: Java 17 on Debian 12),
#     only if no ``java`` is on PATH.
#   * Debian's ``chromium``, only if missing: the report tests render pages headless.
#
# Python packages (psycopg, pyspark) come from the project's ``[test]`` extra.
# Idempotent: does nothing when everything is already present.
# Runs as root, or via sudo when not root.  Usage: bash .ci/install-engines.sh
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

pkgs=()
if ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
    pkgs+=(postgresql)
fi
if ! command -v java >/dev/null 2>&1; then
    pkgs+=(default-jre-headless)
fi
# Headless Chromium: tests/test_report_browser.py opens the HTML reports in it.
if ! command -v chromium >/dev/null 2>&1; then
    pkgs+=(chromium)
fi

if [ "${#pkgs[@]}" -eq 0 ]; then
    echo "install-engines: PostgreSQL server, java and chromium already installed"
    exit 0
fi

# Tell postgresql-common not to create (and start) the default 'main' cluster.
$SUDO mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" \
    | $SUDO tee /etc/postgresql-common/createcluster.d/sqlnb-no-main.conf >/dev/null

echo "install-engines: apt-get install ${pkgs[*]}"
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${pkgs[@]}"
