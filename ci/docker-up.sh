#!/usr/bin/env bash
# Bring up a local Docker engine and the registry-free base image for the harness.
#
# Idempotent: every step checks before acting, so running it twice is cheap.
#   1. install docker.io + debootstrap from the Debian packages apt already uses (if missing);
#   2. start dockerd in the background (if `docker info` does not answer) and wait for it;
#   3. build `harness-base:bookworm` with debootstrap + `docker import` (no registry),
#      unless the image already exists.
#
# Environment knobs (all optional):
#   HARNESS_BASE_IMAGE   image tag to build            (default harness-base:bookworm)
#   HARNESS_DEBIAN_MIRROR  mirror for debootstrap      (default: first URI in apt sources)
#   HARNESS_DOCKERD_LOG  where dockerd logs go          (default /var/log/harness-dockerd.log)
#   HARNESS_DOCKER_WAIT  seconds to wait for dockerd    (default 60)
set -euo pipefail

IMAGE="${HARNESS_BASE_IMAGE:-harness-base:bookworm}"
LOG="${HARNESS_DOCKERD_LOG:-/var/log/harness-dockerd.log}"
WAIT="${HARNESS_DOCKER_WAIT:-60}"
SUITE=bookworm

say() { printf 'docker-up: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# --- 1. packages --------------------------------------------------------------------------
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ "${#need[@]}" -gt 0 ]; then
    say "installing ${need[*]} from the distribution's packages"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${need[@]}" >/dev/null
fi

# --- 2. dockerd ---------------------------------------------------------------------------
if docker info >/dev/null 2>&1; then
    say "engine already answering"
else
    say "starting dockerd (log: $LOG)"
    # setsid + nohup: dockerd must outlive this script and the shell that ran it.
    as_root setsid nohup dockerd >"$LOG" 2>&1 </dev/null &
    for _ in $(seq 1 "$WAIT"); do
        if docker info >/dev/null 2>&1; then break; fi
        sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
        say "dockerd did not answer within ${WAIT}s; last log lines:"
        tail -n 30 "$LOG" >&2 || true
        exit 1
    fi
    say "engine up"
fi

# --- 3. base image ------------------------------------------------------------------------
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    say "$IMAGE already present: $(docker image inspect -f '{{.Id}}' "$IMAGE")"
    exit 0
fi

mirror="${HARNESS_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
    # deb822 (URIs: ...) or one-line (deb URI suite ...) sources; take the first Debian one.
    mirror="$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | awk '{print $2}' | grep -v security | head -n1 || true)"
    if [ -z "$mirror" ]; then
        mirror="$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '{print $2}' | grep -i debian | grep -v security | head -n1 || true)"
    fi
    mirror="${mirror:-http://deb.debian.org/debian}"
fi

root="$(mktemp -d /var/tmp/harness-rootfs.XXXXXX)"
trap 'as_root rm -rf "$root"' EXIT
say "debootstrap $SUITE from $mirror into $root (a few minutes)"
as_root debootstrap --variant=minbase --include=python3,python3-pytest,git \
    "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; exit 1; }
rm -f "$root.log"
# Keep the image small: apt caches and lists are not needed inside trials.
as_root rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
as_root tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    - "$IMAGE" >/dev/null
say "built $IMAGE: $(docker image inspect -f '{{.Id}}' "$IMAGE")"
