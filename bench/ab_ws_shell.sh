#!/usr/bin/env bash
# CPU per frame of the WebSocket shell (bench/ws_shell_cpu.py), a base revision and the working
# tree side by side, alternating round by round so a busy machine affects both alike.
#
#   bench/ab_ws_shell.sh BASE_REV [ROUNDS=6] [extra ws_shell_cpu.py arguments]
#
# The base revision is exported into a temporary folder (git archive); the script itself runs
# from the working tree in both, so both sides measure the same load.
set -euo pipefail
base_rev=${1:?usage: bench/ab_ws_shell.sh BASE_REV [ROUNDS] [args...]}
rounds=${2:-6}
shift $(( $# < 2 ? $# : 2 ))
root=$(git rev-parse --show-toplevel)
base_dir=$(mktemp -d)
trap 'rm -rf "$base_dir"' EXIT
git -C "$root" archive "$base_rev" | tar -x -C "$base_dir"
echo "side client_us/frame server_us/frame frames"
for ((r = 1; r <= rounds; r++)); do
  for side in base work; do
    dir=$root
    [[ $side == base ]] && dir=$base_dir
    (cd "$dir" && PYTHONPATH="$dir" python "$root/bench/ws_shell_cpu.py" "$@") | sed "s/^/$side /"
  done
done
