#!/usr/bin/env bash
# Runs a command with Podman usable for the container tests and `make image`:
# installs Debian's podman, runc, catatonit, docker-compose and CNI's dnsname
# plugin when missing (as root),
# and selects the project's containers.conf (runc, and ulimits root may
# set here) with CONTAINERS_CONF, leaving /etc alone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

missing=()
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v docker-compose >/dev/null || missing+=(docker-compose)
# Pods (and kube play) need an infra container; with no pause image to
# pull, Podman builds one from catatonit.
command -v catatonit >/dev/null || missing+=(catatonit)
# Compose services find each other by name (whguard forwards to http://app:3000):
# with CNI networking, that is the dnsname plugin.
[ -x /usr/lib/cni/dnsname ] || missing+=(golang-github-containernetworking-plugin-dnsname)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "with-podman: missing ${missing[*]} and cannot install them (not root or no apt-get)" >&2
    exit 1
  fi
  echo "with-podman: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
exec "$@"
