#!/usr/bin/env bash
# Builds and runs the consumer workspace (a separate Bazel workspace that
# depends on @verl through local_repository), then stops its Bazel server.
set -euo pipefail
cd "$(dirname "$0")"
start=$(date +%s)
rc=0
bazel test //... || rc=$?
bazel shutdown
echo "consumer workspace: rc=$rc in $(($(date +%s) - start)) s"
exit $rc
