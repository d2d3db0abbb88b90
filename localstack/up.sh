#!/usr/bin/env bash
# Starts LocalStack with docker compose and waits until it is ready.
set -euo pipefail
cd "$(dirname "$0")"

if [[ -z "${LOCALSTACK_AUTH_TOKEN:-}" ]]; then
  cat >&2 <<'MSG'
LOCALSTACK_AUTH_TOKEN is not set.
LocalStack needs an auth token to start. Get one from your LocalStack account,
then:  export LOCALSTACK_AUTH_TOKEN=...  and run make localstack-up again.
Without LocalStack, `make run` runs Outflow locally on the moto server instead.
MSG
  exit 1
fi
if ! docker info >/dev/null 2>&1; then
  echo "No Docker engine is reachable; LocalStack needs one. Use \`make run\` for the Docker-free local stack." >&2
  exit 1
fi

docker compose up -d
echo "waiting for LocalStack on http://localhost:4566 ..."
for _ in $(seq 1 90); do
  if curl -fsS http://localhost:4566/_localstack/health >/dev/null 2>&1; then
    echo "LocalStack is ready."
    exit 0
  fi
  sleep 2
done
echo "LocalStack did not become ready in 3 minutes; see: docker compose -f localstack/docker-compose.yml logs" >&2
exit 1
