#!/usr/bin/env bash
# make demo: the main job on the embedded default (SQLite, fake provider, offline).
# A model reviews a change through a tool, the run parks for a person's approval (exit 3),
# the approval is given, the run resumes and saves its report, and inspect shows it all.
set -euo pipefail
cd "$(dirname "$0")/.."
AGENTCTL=${AGENTCTL:-.venv/bin/agentctl}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp workflows/demo/change.txt "$work/"
db="$work/state/runtime.db"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step agentctl check workflows/hello.yaml
$AGENTCTL check workflows/hello.yaml

step agentctl roll workflows/hello.yaml --workspace "$work" --db "$db"
set +e
$AGENTCTL roll workflows/hello.yaml --workspace "$work" --db "$db"
code=$?
set -e
echo "(exit $code: paused for approval)"
[ "$code" -eq 3 ] || { echo "demo: expected the run to pause (exit 3)" >&2; exit 1; }

run=$($AGENTCTL --output json runs list --db "$db" --limit 1 |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["runs"][0]["runId"])')
approval=$($AGENTCTL --output json approvals list "$run" --db "$db" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["approvals"][0]["approvalId"])')

step agentctl approvals list "$run"
$AGENTCTL approvals list "$run" --db "$db"

step agentctl approvals approve "$approval" --reason "demo: the test command is safe"
$AGENTCTL approvals approve "$approval" --reason "demo: the test command is safe" --db "$db"

step agentctl resume "$run"
$AGENTCTL resume "$run" --db "$db"

step cat out/review.md
cat "$work/out/review.md"; echo

step agentctl inspect "$run"
$AGENTCTL inspect "$run" --db "$db"

step agentctl audit "$run" --verify
$AGENTCTL audit "$run" --verify --db "$db" | tail -n 1
