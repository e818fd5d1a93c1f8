#!/usr/bin/env bash
# The main job on the built-in offline defaults, step by step, on bundled sample evidence:
# evidence in, branch proposed, checked, reviewed, merged, indexed, searched.
set -euo pipefail
KB=${KB:-kb}
DEMO_DIR=${DEMO_DIR:-demo}
SAMPLES=$(cd "$(dirname "$0")/../kb/samples" && pwd)

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }

rm -rf "$DEMO_DIR"
step "$KB" init "$DEMO_DIR"
cd "$DEMO_DIR"
step "$KB" evidence add "$SAMPLES/travel-policy.md" --kind document --source "sample: travel policy"
step "$KB" evidence add "$SAMPLES/alice-2025-03-02.json" --kind conversation --user alice
step "$KB" evidence list
# propose, check, review and merge the first session and the policy; the merge builds the index
step "$KB" run
step "$KB" memory show --user alice
# a later session changes two facts: the older claims are closed, not overwritten
step "$KB" evidence add "$SAMPLES/alice-2025-06-18.json" --kind conversation --user alice
# (captured, then printed: a `tee /dev/stderr` would reopen, and so truncate, a log file that
# holds both streams, as in `make demo > log 2>&1`)
printf '\n$ %s propose\n' "$KB"
proposal=$("$KB" propose)
printf '%s\n' "$proposal"
branch=$(printf '%s\n' "$proposal" | sed -n 's/^branch \([^ ]*\) .*/\1/p')
step "$KB" review "$branch"
step "$KB" merge "$branch"
step "$KB" check
step "$KB" index status
step "$KB" search "where does alice live" --as user:alice --k 3
step "$KB" search "meal allowance outside the EU" --k 2
step "$KB" search "where does alice live" --as user:bob --k 3
step "$KB" memory context --user alice "Which seat should I book for my flight?" --budget 600
step git log --oneline --graph -n 8
