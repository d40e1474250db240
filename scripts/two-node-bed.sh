#!/usr/bin/env bash
# A two-node test bed on one machine, by hand (issue 51): two sshfs (FUSE)
# mounts of one export directory, served by a loopback sshd, standing for two
# NFS clients; each node has its own hostname, PID namespace and boot id.
# The tests use the same bed (tests/python/two_node_bed.py, which this runs).
#
#   scripts/two-node-bed.sh up              make the bed (prints where)
#   scripts/two-node-bed.sh run A|B CMD...  run CMD on node A or B
#   scripts/two-node-bed.sh down            unmount, end both nodes, stop sshd
#
# The shared directory is the same path on both nodes: <bed>/shared (try
# `scripts/two-node-bed.sh run A hostname`, or point ABICACHE_DIR at
# <bed>/shared/cache on both). The bed lives in $ABICACHE_TWO_NODE_BED
# (default ${TMPDIR:-/tmp}/abicache-two-node-bed). Needs root, /dev/fuse, and
# Debian's openssh-server and sshfs (scripts/setup-services.sh installs them).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bed=${ABICACHE_TWO_NODE_BED:-${TMPDIR:-/tmp}/abicache-two-node-bed}
case ${1:-} in
  up|down) exec python3 "$repo/tests/python/two_node_bed.py" "$1" "$bed" ;;
  run) shift; exec python3 "$repo/tests/python/two_node_bed.py" run "$bed" "$@" ;;
  -h|--help|"") sed -n '2,/^set -euo/p' "$0" | sed '$d'; [ -n "${1:-}" ] ;;
  *) echo "two-node-bed: unknown command \`$1\` (up, run NODE CMD..., down; see --help)" >&2; exit 2 ;;
esac
