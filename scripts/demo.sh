#!/usr/bin/env bash
# make demo: start the local stack with 4 agents, run a short 4 KiB random-read benchmark as
# 4 clients started together, through the API,
# the queue and the agents, print the result table, and stop the stack again.
set -euo pipefail
cd "$(dirname "$0")/.."
AGENTS="${DEMO_AGENTS:-4}"
CLIENTS="${DEMO_CLIENTS:-4}"
SCRATCH="${DEMO_SCRATCH:-$PWD/.local/scratch}"

benchctl local down >/dev/null 2>&1 || true
trap 'benchctl local down' EXIT
benchctl local up --agents "$AGENTS" --target "scratch=$SCRATCH" --create
benchctl local status
benchctl run --target scratch --rw randread --bs 4k --iodepth 16 --size 64m \
  --runtime 5 --ramp-time 1 --clients "$CLIENTS" --tag source=demo --wait --timeout 300
