#!/usr/bin/env bash
# Builds template.yaml with SAM and deploys it to LocalStack with samlocal.
set -euo pipefail
cd "$(dirname "$0")/.."

STACK="${OUTFLOW_STACK:-outflow}"
SAMLOCAL=".venv/bin/samlocal"
export SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"

if [[ ! -x "$SAMLOCAL" ]]; then
  echo "samlocal is missing: run make localstack-tools" >&2
  exit 1
fi

GOFLAGS="-trimpath -ldflags=-s -tags=lambda.norpc" CGO_ENABLED=0 "$SAMLOCAL" build
# A one-minute sweep keeps the end-to-end test short; the e2e test sends to
# the example queue (ExampleTargets); everything else is the template's
# defaults.
"$SAMLOCAL" deploy \
  --stack-name "$STACK" \
  --resolve-s3 \
  --no-confirm-changeset \
  --no-fail-on-empty-changeset \
  --capabilities CAPABILITY_IAM \
  --parameter-overrides "SweepRate=rate(1 minute)" "WakeGraceSeconds=5" "ExampleTargets=true"
echo "deployed stack $STACK to LocalStack"
