#!/bin/bash
# test-schemas.sh SOURCE_ROOT WORK_DIR - deploy/kubernetes/ against the
# Kubernetes API schemas (validate.js, kubernetes-models), with the npm
# packages installed by `npm ci` from package-lock.json into WORK_DIR
# (reused while the lock file is unchanged; npm's cache: $IBVF_NPM_CACHE,
# default /var/cache/ibvf-ci/npm when writable). Needs Debian's nodejs and
# npm (tools/install-deps) and the npm registry; exits 77 (SKIP) without them
# unless IBVF_REQUIRE_LABS=1. TAP output (validate.js).
set -u
SRC=$1 W=$2
skip() {
	echo "SKIP: $*" >&2
	[ "${IBVF_REQUIRE_LABS:-0}" = 1 ] && { echo "Bail out! $* (IBVF_REQUIRE_LABS=1)"; exit 1; }
	exit 77
}
command -v node >/dev/null || skip "node is not installed (Debian nodejs; tools/install-deps)"
command -v npm >/dev/null || skip "npm is not installed (Debian npm; tools/install-deps)"
mkdir -p "$W" || exit 1
cache=${IBVF_NPM_CACHE:-/var/cache/ibvf-ci/npm}
mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] || cache=$W/.npm-cache
if ! cmp -s "$SRC/tests/deploy/package-lock.json" "$W/package-lock.json" || [ ! -d "$W/node_modules" ]; then
	cp "$SRC/tests/deploy/package.json" "$SRC/tests/deploy/package-lock.json" "$W/" || exit 1
	if ! (cd "$W" && npm ci --no-audit --no-fund --ignore-scripts --cache "$cache" >"$W/npm-ci.log" 2>&1); then
		tail -20 "$W/npm-ci.log" >&2
		rm -f "$W/package-lock.json"
		skip "npm ci failed (the npm registry unreachable?): $W/npm-ci.log"
	fi
fi
cp "$SRC/tests/deploy/validate.js" "$W/" || exit 1
exec node "$W/validate.js" "$SRC/deploy/kubernetes"
