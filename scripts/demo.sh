#!/usr/bin/env bash
# The main job on the built-in offline defaults, step by step, on bundled sample evidence.
set -euo pipefail
KB=${KB:-kb}
DEMO_DIR=${DEMO_DIR:-demo}
SAMPLES=$(cd "$(dirname "$0")/../kb/samples" && pwd)

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

rm -rf "$DEMO_DIR"
step "$KB" init "$DEMO_DIR"
cd "$DEMO_DIR"
step "$KB" evidence add "$SAMPLES/travel-policy.md" --kind document --source "sample: travel policy"
step "$KB" evidence add "$SAMPLES/alice-2025-03-02.json" "$SAMPLES/alice-2025-06-18.json" --kind conversation --user alice
step "$KB" evidence list
first=$("$KB" evidence list --user alice | head -n 1 | cut -d' ' -f1)
step "$KB" evidence show "$first" --lines 3-6
step "$KB" check
step git log --oneline
