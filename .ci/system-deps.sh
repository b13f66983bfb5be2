#!/usr/bin/env bash
# System packages dpkit's commands drive for real: Java 17 (Spark: the Spark tests and the Spark
# tutorial of the documentation), a PostgreSQL server (ledger tests) and a headless Chromium with
# its driver (web-page tests).
#
#   bash .ci/system-deps.sh            # everything (the test suite)
#   bash .ci/system-deps.sh java       # only what is named: java, postgresql, chromium
#
# Installs only what is missing; needs root (or sudo) for apt-get when something is missing.
set -euo pipefail
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(java postgresql chromium)
missing=()
for what in "${wanted[@]}"; do
    case "$what" in
        java) command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless) ;;
        postgresql) ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql) ;;
        chromium)
            command -v chromium >/dev/null 2>&1 || missing+=(chromium)
            command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver) ;;
        *) echo "system-deps.sh: unknown part '$what' (java, postgresql, chromium)" >&2; exit 2 ;;
    esac
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "installing system packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
