#!/usr/bin/env bash
# Best-effort install of the Debian tools some tests use (the README's test command calls this).
# Usage: scripts/ensure-tools.sh TOOL...   (TOOL is a command name; see the table below)
# A tool already on PATH is left alone. Without root or apt-get nothing is installed and the
# tests that need the tool skip with a stated reason. Never fails the build by itself.
set -uo pipefail

package_for() {
  case "$1" in
    chromium) echo chromium ;;
    shellcheck) echo shellcheck ;;
    systemd-analyze) echo systemd ;;
    ssh-keygen) echo openssh-client ;;
    pg_ctlcluster|postgres) echo postgresql ;;
    tar) echo tar ;;
    softhsm2-util) echo softhsm2 ;;
    docker-registry) echo docker-registry ;;
    skopeo) echo skopeo ;;
    valgrind) echo valgrind ;;  # the performance gate's instruction counts
    *) echo "" ;;
  esac
}

missing=()
for tool in "$@"; do
  command -v "$tool" >/dev/null 2>&1 && continue
  [ "$tool" = postgres ] && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && continue
  pkg="$(package_for "$tool")"
  if [ -z "$pkg" ]; then echo "ensure-tools: unknown tool '$tool'" >&2; continue; fi
  missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-tools: not installing ${missing[*]} (needs root and apt-get); their tests will skip" >&2
  exit 0
fi
echo "ensure-tools: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    >/tmp/k3kit-ensure-tools.log 2>&1; then
  echo "ensure-tools: installing ${missing[*]} failed (see /tmp/k3kit-ensure-tools.log); their tests will skip" >&2
fi
exit 0
