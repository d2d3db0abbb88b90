#!/usr/bin/env bash
# Scans template.yaml and its SAM translation with checkov, offline: no API
# key, no policy or guideline download, no version check. Exits non-zero on
# any finding not suppressed in the template (Metadata: checkov: skip).
#
# Usage: scripts/checkov.sh CHECKOV PYTHON TEMPLATE
#   CHECKOV  the pinned checkov (make checkov installs it in .venv-checkov)
#   PYTHON   a Python with samtranslator (.venv/bin/python) for the translation
#
# Both files are scanned: template.yaml carries the suppressions where they
# are read, and SAM's translation (the same one internal/stack's tests read)
# adds the resources SAM generates, such as the schedule's role and the
# stream mapping. Metadata, and so each suppression, carries through it.
set -euo pipefail

checkov=$1 python=$2 template=$3
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Nothing here may reach the network: without a key checkov scans locally,
# --skip-download and BC_SKIP_MAPPING skip the policy metadata and guideline
# download, CKV_SKIP_PACKAGE_UPDATE_CHECK the version check on start.
offline=(env -u BC_API_KEY -u PRISMA_API_URL -u BC_API_URL
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true BC_SKIP_MAPPING=TRUE)

# A network namespace of its own proves it: any attempt to connect fails.
# It needs root (or user namespaces); elsewhere the flags above still keep
# checkov offline, and this says so.
if unshare -n true 2>/dev/null; then
	offline=(unshare -n "${offline[@]}")
else
	echo "checkov.sh: unshare -n is not available here; running without an isolated network namespace (offline by flags only)" >&2
fi

"${offline[@]}" "$python" "$here/internal/stack/translate.py" "$template" >"$out/template.translated.json"
"${offline[@]}" "$checkov" --framework cloudformation --skip-download --compact --quiet \
	-f "$template" -f "$out/template.translated.json"
