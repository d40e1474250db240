#!/usr/bin/env bash
# The aarch64 wheel on an emulated Arm machine (issue 52): an arm64 Debian
# root run under qemu-user, with the cross-built manylinux_2_28_aarch64
# wheel and torch's aarch64 wheel from PyPI installed in it. Slow (minutes of
# emulated compiles), so scripts/bench.sh runs it, not CI.
#
#   scripts/aarch64-check.sh          (as root: it mounts, chroots, installs Debian packages)
#
# Steps, each printed with its time, then the total; any failure exits non-zero:
#  1. host tools, as root, once per machine (a stamp): debootstrap,
#     binfmt-support and qemu-user-static from Debian. qemu comes from
#     bookworm-backports (10.0): qemu >= 8.2 emulates /proc/cpuinfo for
#     aarch64 (the emulated CPU's `Features`, `CPU part`, ...), which GCC's
#     `-mcpu=native` and abicache's CPU guard read; 7.2 (bookworm) shows the
#     x86 host's. binfmt_misc is mounted when it is not, and qemu-aarch64
#     registered with the F flag (the interpreter is opened at registration,
#     so it runs inside the chroot).
#  2. the arm64 root, once per recipe (a stamp): `debootstrap --arch=arm64
#     --foreign` (bookworm, minbase, python3-venv, g++), its second stage under
#     qemu, a venv /opt/venv with torch (TORCH below) and auditwheel from
#     PyPI. Kept under $ABICACHE_DEV_HOME/aarch64/ (~2 GB) and reused.
#  3. the aarch64 wheel: `scripts/install-python-package.sh --print-wheel
#     --target aarch64-unknown-linux-gnu` (cross-built with zig, once per
#     source state);
#  4. scripts/check-wheel.sh on it, run inside the root (tag, size, auditwheel
#     under aarch64's policies, a fresh venv gets `abicache`);
#  5. the wheel into /opt/venv; `abicache --version`, `abicache key` and
#     `abicache build` of examples/cpu_muladd (the CPU example scripts/demo.sh
#     uses); `import abicache`, `TorchOpsExtension.load()` of the example and
#     a call of its op;
#  6. the instruction-set rules on AArch64 flags: `-mcpu=native` keyed by the
#     emulated CPU (`abicache key` under two QEMU_CPU models: the `host_cpu`
#     field differs), and an extension built with `-march=armv8-a+sve2`
#     refused on an emulated Neoverse V1 (SVE, no SVE2) with the guard's error.
#
# torch: PyPI's aarch64 torch wheels from 2.11 on are CUDA builds that need
# ~3 GB of nvidia-* wheels to import; 2.10.0 is the newest CPU-only aarch64
# wheel on PyPI, so the root installs that (with its ordinary dependencies).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh

SUITE=bookworm
MIRROR=http://deb.debian.org/debian
TORCH=torch==2.10.0
ROOT_PACKAGES=python3,python3-venv,g++,ca-certificates
# The emulated CPU models. torch 2.10's aarch64 wheel needs Armv8.2 (it stops
# with SIGILL at `import torch` on a Cortex-A72), so: a Neoverse N1 (no SVE)
# for the example, a Neoverse V1 (SVE, no SVE2) for the refusal, and the
# two differ for the native key.
CPU=neoverse-n1
CPU_NO_SVE2=neoverse-v1

if [ "$(id -u)" != 0 ]; then
  echo "aarch64-check: needs root (apt-get, mount, chroot); run it as root" >&2
  exit 2
fi

start=$SECONDS
step_start=$SECONDS
step_name=
# step NAME: ends the previous step (printing its time) and starts NAME.
step() {
  [ -z "$step_name" ] || echo "aarch64-check: -- $step_name: $((SECONDS - step_start)) s" >&2
  step_name=$1
  step_start=$SECONDS
  [ -z "$1" ] || echo "aarch64-check: == $1" >&2
}
fail() { echo "aarch64-check: FAILED at \`$step_name\`: $*" >&2; exit 1; }

base=$ABICACHE_DEV_HOME/aarch64
root=$base/root
mkdir -p "$base"
# One run at a time uses the root (its mounts, its /opt/venv).
dev_lock root_lock -x "$base/root.lock" aarch64-check

mounted=()
cleanup() {
  local rc=$? m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    m=${mounted[i]}
    umount -l "$m" 2>/dev/null || true
  done
  [ $rc = 0 ] || echo "aarch64-check: failed after $((SECONDS - start)) s" >&2
}
trap cleanup EXIT
mount_in_root() {
  mountpoint -q "$root/proc" || { mount -t proc proc "$root/proc"; mounted+=("$root/proc"); }
  mountpoint -q "$root/dev" || { mount --bind /dev "$root/dev"; mounted+=("$root/dev"); }
  mountpoint -q "$root/sys" || { mount --bind /sys "$root/sys"; mounted+=("$root/sys"); }
  cp /etc/resolv.conf "$root/etc/resolv.conf"
}
# in_root [VAR=VALUE]... -- SCRIPT: runs SCRIPT with bash in the root, in a
# clean environment (the host's PIP_* and the like stay out), /opt/venv first on PATH.
in_root() {
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  env -i HOME=/root LANG=C.UTF-8 TERM=dumb ABICACHE_PCH=0 ABICACHE_DEV_TARGET_SHOWN=1 PIP_CERT=/etc/ssl/host-ca-certificates.crt \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "${vars[@]}" chroot "$root" /bin/bash -euo pipefail -c "$1"
}

step "host tools (debootstrap, qemu-user-static >= 8.2, binfmt_misc)"
qemu_ok() {
  command -v qemu-aarch64-static >/dev/null && command -v debootstrap >/dev/null \
    && [ -x /usr/libexec/qemu-binfmt/aarch64-binfmt-P ] \
    && qemu-aarch64-static --version | head -n1 \
      | awk '{ split($3, v, "."); exit !(v[1] > 8 || (v[1] == 8 && v[2] >= 2)) }'
}
if ! qemu_ok; then
  dev_lock apt_lock -x "$ABICACHE_DEV_HOME/apt.lock" aarch64-check
  if ! qemu_ok; then
    backports=/etc/apt/sources.list.d/abicache-bookworm-backports.sources
    if [ ! -f "$backports" ]; then
      printf '%s\n' "Types: deb" "URIs: $MIRROR" "Suites: bookworm-backports" "Components: main" \
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" > "$backports"
    fi
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t bookworm-backports \
      qemu-user-static qemu-user qemu-user-binfmt debootstrap binfmt-support >&2
  fi
  dev_unlock apt_lock
  qemu_ok || fail "qemu-aarch64-static >= 8.2 and debootstrap are still missing after apt-get (above)"
fi
echo "aarch64-check: $(qemu-aarch64-static --version | head -n1)" >&2
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -f "$binfmt/register" ]; then
  mount -t binfmt_misc binfmt_misc "$binfmt" || fail "cannot mount binfmt_misc at $binfmt (a container without that privilege?)"
fi
if [ -f "$binfmt/qemu-aarch64" ] && ! grep -q '^flags: .*F' "$binfmt/qemu-aarch64"; then
  echo -1 > "$binfmt/qemu-aarch64"   # registered without F: it would not run inside the chroot
fi
if [ ! -f "$binfmt/qemu-aarch64" ]; then
  conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  [ -f "$conf" ] || fail "no $conf (from qemu-user-binfmt) to register qemu-aarch64 with"
  line=$(head -n1 "$conf")
  [[ ${line##*:} == *F* ]] || line=${line}F
  printf '%s\n' "$line" > "$binfmt/register"
fi
grep -q '^enabled' "$binfmt/qemu-aarch64" && grep -q '^flags: .*F' "$binfmt/qemu-aarch64" \
  || fail "qemu-aarch64 is not registered with the F flag: $(cat "$binfmt/qemu-aarch64")"

step "arm64 root ($root)"
# Two stamps: the Debian root (debootstrap, ~25 minutes under emulation) and
# its venv (torch), so a change to one keeps the other.
base_recipe=$(printf '%s\n' "$SUITE" "$MIRROR" "$ROOT_PACKAGES" | sha256sum | cut -c1-16)
venv_recipe=$(printf '%s\n' "$TORCH" 'auditwheel==6.*' | sha256sum | cut -c1-16)
stamp=$base/root.stamp
venv_stamp=$root/opt/venv/.abicache-aarch64-stamp
if [ "$(cat "$stamp" 2>/dev/null)" != "$base_recipe" ]; then
  echo "aarch64-check: making the root (debootstrap, then its second stage under qemu: ~25 minutes)" >&2
  rm -f "$stamp"
  rm -rf "$root"
  mkdir -p "$root"
  debootstrap --arch=arm64 --foreign --variant=minbase --include="$ROOT_PACKAGES" \
    "$SUITE" "$root" "$MIRROR" >&2 || fail "debootstrap --foreign (above)"
  in_root -- '/debootstrap/debootstrap --second-stage' >&2 || fail "debootstrap's second stage under qemu (above)"
  echo "$base_recipe" > "$stamp"
fi
mount_in_root
# pip in the root trusts what this machine trusts (a proxy's own CA included).
cp "${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}" "$root/etc/ssl/host-ca-certificates.crt"
if [ "$(cat "$venv_stamp" 2>/dev/null)" != "$venv_recipe" ]; then
  echo "aarch64-check: installing $TORCH and auditwheel into the root's /opt/venv (PyPI; minutes under emulation)" >&2
  in_root -- "rm -rf /opt/venv && python3 -m venv /opt/venv && python -m pip install --quiet --upgrade pip \
    && python -m pip install --quiet '$TORCH' 'auditwheel==6.*' && apt-get clean && rm -rf /root/.cache/pip" >&2 \
    || fail "installing torch into the root's venv (above)"
  echo "$venv_recipe" > "$venv_stamp"
fi
mount_in_root
echo "aarch64-check: root: $(du -sh --exclude=proc --exclude=sys --exclude=dev "$root" 2>/dev/null | cut -f1)," \
  "$(in_root -- 'python3 --version; g++ --version | head -n1' | tr '\n' ' ')" >&2

step "the aarch64 wheel (cross-built with zig)"
wheel=$(scripts/install-python-package.sh --print-wheel --target aarch64-unknown-linux-gnu) \
  || fail "building the aarch64 wheel (above)"
echo "aarch64-check: $(basename "$wheel") ($(( $(stat -c %s "$wheel") / 1000 )) kB)" >&2
work=$root/opt/check
rm -rf "$work"
mkdir -p "$work/scripts" "$work/wheel"
cp "$wheel" "$work/wheel/"
cp scripts/check-wheel.sh scripts/dev-env.sh "$work/scripts/"
cp -r examples/cpu_muladd "$work/cpu_muladd"
rwheel=/opt/check/wheel/$(basename "$wheel")

step "what the emulated CPUs show (/proc/cpuinfo, HWCAP)"
for cpu in "$CPU" "$CPU_NO_SVE2"; do
  echo "aarch64-check: QEMU_CPU=$cpu:" >&2
  in_root QEMU_CPU="$cpu" -- "uname -m; grep -m1 -E '^Features' /proc/cpuinfo; grep -m1 'CPU part' /proc/cpuinfo
    LD_SHOW_AUXV=1 /bin/true | grep -E 'AT_HWCAP2?:'" | sed 's/^/    /' >&2
done

step "scripts/check-wheel.sh under emulation"
in_root QEMU_CPU="$CPU" -- "cd /opt/check && scripts/check-wheel.sh $rwheel" >&2 || fail "check-wheel.sh (above)"

step "abicache --version, key, build of the CPU example (QEMU_CPU=$CPU)"
in_root QEMU_CPU="$CPU" -- "python -m pip install --quiet --no-deps --force-reinstall $rwheel
  export ABICACHE_DIR=/opt/check/cache
  abicache --version
  abicache key /opt/check/cpu_muladd/abicache.toml
  abicache build /opt/check/cpu_muladd/abicache.toml" >&2 || fail "the abicache command (above)"

step "import abicache, TorchOpsExtension.load() and the op"
in_root QEMU_CPU="$CPU" -- "cd /opt/check && ABICACHE_DIR=/opt/check/cache python - <<'PY'
import importlib.metadata, pathlib, platform, torch, abicache
here = pathlib.Path('/opt/check/cpu_muladd')
ext = abicache.TorchOpsExtension('muladd_example', [here / 'ops.cpp', here / 'kernel.cpp'], required_ops=['muladd'])
path = ext.load()
a = torch.arange(4.0)
out = torch.ops.muladd_example.muladd(a, a, 1.0).tolist()
assert out == [1.0, 2.0, 5.0, 10.0], out
print(f'{platform.machine()}: torch {torch.__version__}, abicache {importlib.metadata.version(abicache.__name__)} '
      f'({abicache.__file__}): muladd(a, a, 1.0) = {out} from {path}')
PY" >&2 || fail "loading the example and calling its op (above)"

step "-mcpu=native keyed by the emulated CPU"
mkdir -p "$work/native"
cp examples/cpu_muladd/*.cpp examples/cpu_muladd/*.h "$work/native/"
cat > "$work/native/abicache.toml" <<'EOF'
[[extension]]
name = "muladd_native"
sources = ["ops.cpp", "kernel.cpp"]
required_ops = ["muladd"]
extra_cflags = ["-O2", "-mcpu=native"]
EOF
native_key() {
  in_root QEMU_CPU="$1" -- "ABICACHE_DIR=/opt/check/cache abicache key --json /opt/check/native/abicache.toml"
}
field() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(d[sys.argv[1]])' "$1"; }
declare -A keys host_cpus
for cpu in "$CPU" "$CPU_NO_SVE2"; do
  json=$(native_key "$cpu") || fail "abicache key of a -mcpu=native spec under QEMU_CPU=$cpu (above)"
  keys[$cpu]=$(printf '%s' "$json" | field key)
  host_cpus[$cpu]=$(printf '%s' "$json" | python3 -c 'import json, sys
d = json.load(sys.stdin)
p = d["payload"]
print(next(l for l in (p if isinstance(p, list) else p.splitlines()) if l.startswith("host_cpu")))')
  echo "aarch64-check: QEMU_CPU=$cpu: key ${keys[$cpu]}, ${host_cpus[$cpu]}" >&2
done
[ "${host_cpus[$CPU]}" != "${host_cpus[$CPU_NO_SVE2]}" ] \
  || fail "-mcpu=native keyed the same host_cpu on $CPU and $CPU_NO_SVE2"
[ "${keys[$CPU]}" != "${keys[$CPU_NO_SVE2]}" ] || fail "the same key on $CPU and $CPU_NO_SVE2"

step "+sve2 refused on an emulated CPU without SVE2 (QEMU_CPU=$CPU_NO_SVE2)"
in_root QEMU_CPU="$CPU_NO_SVE2" -- "grep -qw sve2 /proc/cpuinfo && { echo 'this emulated CPU lists sve2' >&2; exit 1; }
cd /opt/check && ABICACHE_DIR=/opt/check/cache python - <<'PY'
import pathlib, abicache
# One small unit (no torch headers: seconds to compile under emulation); the
# guard refuses before anything is loaded.
src = pathlib.Path('/opt/check/sve2/probe.cpp')
src.parent.mkdir(exist_ok=True)
src.write_text('extern \"C\" int sve2_probe(int x) { return x + 1; }\n')
ext = abicache.TorchOpsExtension('sve2_probe', [src], extra_cflags=['-march=armv8-a+sve2'])
try:
    path = ext.load()
except Exception as e:
    message = str(e)
    print(f'refused ({type(e).__name__}): {message}')
    assert 'this CPU lacks' in message and 'sve2' in message, message
    assert '-march=armv8-a+sve2' in message, message
else:
    raise SystemExit(f'loaded {path} on a CPU without SVE2: the guard did not refuse it')
PY" >&2 || fail "the SVE2 refusal (above)"

step ""
echo "aarch64-check: passed in $((SECONDS - start)) s" >&2
