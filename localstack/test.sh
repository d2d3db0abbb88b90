#!/usr/bin/env bash
# Runs the end-to-end suite against the stack deploy.sh deployed to LocalStack.
set -euo pipefail
cd "$(dirname "$0")/.."

export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export OUTFLOW_STACK="${OUTFLOW_STACK:-outflow}"

# The same store and engine suites, against LocalStack's DynamoDB and SQS.
OUTFLOW_TEST_ENDPOINT="$AWS_ENDPOINT_URL" go test -count=1 ./internal/dynamo/... ./internal/delivery/... ./internal/outbox/...
# The deployed stack: real schedule, real stream mapping, the CLI.
go test -count=1 -tags localstack -timeout 10m ./localstack/e2e/...
