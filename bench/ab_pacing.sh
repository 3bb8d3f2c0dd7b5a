#!/usr/bin/env bash
# Side-by-side pacing runs of two revisions: base (a git revision, checked out into a temporary
# worktree) and the working tree, alternating, so a noisy machine affects both alike.
#
#   bench/ab_pacing.sh BASE_REV [ROUNDS=2] [SIZES=100] [extra session_pacing.py arguments]
#
# Prints, per run, the whole-run, steady-state and memory rows of session_pacing.py's tables
# (client and server CPU per frame in the last column of the steady-state row). Compare at a size where neither process saturates a
# core: a saturated process reads ~1 core / frame rate whatever its code does.
set -euo pipefail
base_rev=${1:?usage: bench/ab_pacing.sh BASE_REV [ROUNDS] [SIZES] [args...]}
rounds=${2:-2}
sizes=${3:-100}
shift $(( $# < 3 ? $# : 3 ))
root=$(git rev-parse --show-toplevel)
base_dir=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$base_dir" >/dev/null 2>&1 || rm -rf "$base_dir"' EXIT
git -C "$root" worktree add --detach --force "$base_dir" "$base_rev" >/dev/null
for ((r = 1; r <= rounds; r++)); do
  for side in base work; do
    dir=$root
    [[ $side == base ]] && dir=$base_dir
    out=$(cd "$dir" && PYTHONPATH="$dir" python bench/session_pacing.py --only pacing \
      --sizes "$sizes" --wait-idle 10 "$@" 2>/dev/null)
    echo "$out" | grep -E '^\| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|' \
      | sed "s/^/$side whole  /"
    echo "$out" | grep -E '^\| [0-9]+ \| [0-9]+\.[0-9]+ \|' | sed "s/^/$side steady /"
    echo "$out" | grep -E '^\| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \|$' \
      | sed "s/^/$side memory /"
  done
done
