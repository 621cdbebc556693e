#!/usr/bin/env bash
# Install the system packages kernel zoo uses, when running as root and they are missing:
# bubblewrap (the sandbox backend), chromium (browser tests), docker-compose (the test that
# checks deploy/compose.yaml) and docker.io (dockerd, which tests/integration/docker starts on a
# private socket to run the docker backend for real). Others are told what to run.
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing system packages: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${need[@]}" >/dev/null
else
    echo "note: missing system packages ${need[*]}; install them (e.g. sudo apt-get install ${need[*]})" >&2
fi
