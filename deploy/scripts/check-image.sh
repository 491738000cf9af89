#!/usr/bin/env bash
# Runs deploy/Dockerfile's steps without a Docker engine and starts each resulting tree the way
# the container would, as a user who cannot write to it (the image's files belong to root and
# the pod's root filesystem is read-only):
#   build      npm ci + tsc -b <workspace>          (the Dockerfile's `build` stage)
#   prod-deps  npm ci --omit=dev --workspace <ws>   (`prod-deps`)
#   assemble   deploy/scripts/image.sh assemble     (`assemble`)
#   run        node main.js: its metrics server answers /livez (every module loaded), then
#              SIGTERM ends it cleanly.
# Also checks that each tree holds the .proto files and no development dependency.
#
#   deploy/scripts/check-image.sh [SERVICE...]    (default: the gateway and all eight services)
#
# npm: the image's (node:20 ships npm 10); npm 10 is used here too, through npx.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NPM=(npx --yes npm@10.8.2)
SERVICES=("$@")
[ ${#SERVICES[@]} -gt 0 ] || SERVICES=(gateway auth domains contacts emails campaigns suppressions webhooks analytics)

WORK=$(mktemp -d)
cleanup() { chmod -R u+w "$WORK" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
FAILED=()

# The build context, as .dockerignore leaves it (sources and manifests only).
copy_context() { # $1: destination
  local dest=$1
  mkdir -p "$dest"
  (cd "$ROOT" && tar -cf - \
    --exclude=node_modules --exclude=dist --exclude='*.tsbuildinfo' --exclude=coverage \
    --exclude='services/*/test' --exclude='gateway/test' \
    package.json package-lock.json tsconfig.base.json tsconfig.json proto services gateway \
    deploy/package.json deploy/scripts/image.sh) | (cd "$dest" && tar -xf -)
}

manifests_only() { # $1: destination
  local dest=$1
  mkdir -p "$dest"
  (cd "$ROOT" && tar -cf - package.json package-lock.json proto/package.json services/*/package.json \
    gateway/package.json gateway/console/package.json deploy/package.json deploy/scripts/image.sh) | (cd "$dest" && tar -xf -)
}

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

echo "== build stage: npm ci, tsc -b"
copy_context "$WORK/src"
(cd "$WORK/src" && "${NPM[@]}" ci --no-audit --no-fund --loglevel=error >/dev/null)
for svc in "${SERVICES[@]}"; do
  ws=$(sh "$WORK/src/deploy/scripts/image.sh" workspace "$svc")
  (cd "$WORK/src" && node_modules/.bin/tsc -b "$ws") || FAILED+=("$svc: tsc -b $ws")
  # The gateway serves the web console (the Dockerfile's build stage builds it too).
  if [ "$svc" = gateway ]; then
    (cd "$WORK/src" && "${NPM[@]}" run build -w gateway/console >/dev/null) || FAILED+=("gateway: console build")
  fi
done

for svc in "${SERVICES[@]}"; do
  echo "== $svc"
  ws=$(sh "$WORK/src/deploy/scripts/image.sh" workspace "$svc")
  deps="$WORK/deps-$svc"
  manifests_only "$deps"
  (cd "$deps" && "${NPM[@]}" ci --omit=dev --no-audit --no-fund --loglevel=error --workspace "$ws" >/dev/null)
  app="$WORK/app-$svc"
  if ! sh "$WORK/src/deploy/scripts/image.sh" assemble "$svc" "$WORK/src" "$deps" "$app"; then
    FAILED+=("$svc: assemble")
    continue
  fi
  echo "   $(du -sh "$app" | cut -f1), $(find "$app/node_modules" -maxdepth 2 -name package.json | wc -l) top-level packages"
  [ -n "$(find "$app/proto" -name '*.proto' -print -quit)" ] || FAILED+=("$svc: no .proto files")
  [ "$svc" != gateway ] || [ -f "$app/gateway/console/dist/index.html" ] || FAILED+=("gateway: no web console (gateway/console/dist)")
  for dev in typescript vitest eslint @bufbuild/buf ts-proto; do
    [ ! -e "$app/node_modules/$dev" ] || FAILED+=("$svc: development dependency $dev in the image")
  done
  chmod -R a-w "$app"
  if [ "$svc" = auth ]; then
    # The operator CLI (NOTES.txt, the bootstrap Job) runs from the auth image.
    if (cd "$app" && env -i PATH="$PATH" HOME=/nonexistent node services/auth/bin/mailfleet.mjs --help >"$WORK/cli.log" 2>&1); then
      echo "   CLI: $(head -1 "$WORK/cli.log")"
    else
      cat "$WORK/cli.log"
      FAILED+=("auth: node services/auth/bin/mailfleet.mjs --help failed")
    fi
  fi

  metrics=$(free_port)
  log="$WORK/run-$svc.log"
  # No MongoDB or NATS here: a process loads all of its modules (static imports), starts its
  # metrics server and then waits for them; /livez answering proves the tree is complete.
  url="http://127.0.0.1:$metrics/livez"
  if [ "$svc" = gateway ]; then
    (cd "$app" && exec env -i PATH="$PATH" HOME=/nonexistent NODE_ENV=production PORT="$(free_port)" HOST=127.0.0.1 \
      METRICS_PORT="$metrics" NATS_URL=nats://127.0.0.1:9 TRACKING_SIGNING_KEY=check-image-tracking-signing-key-0 \
      node main.js) >"$log" 2>&1 &
  else
    (cd "$app" && exec env -i PATH="$PATH" HOME=/nonexistent NODE_ENV=production GRPC_PORT="$(free_port)" \
      METRICS_PORT="$metrics" MONGO_URL=mongodb://127.0.0.1:9 NATS_URL=nats://127.0.0.1:9 \
      DKIM_MASTER_KEY=636865636b2d696d6167652d646b696d2d6d61737465722d6b65792d3030303030 API_KEY_HASH_SECRET=check-image-api-key-hash-secret-00 \
      TRACKING_SIGNING_KEY=check-image-tracking-signing-key-0 node main.js) >"$log" 2>&1 &
  fi
  pid=$!
  ok=false
  for _ in $(seq 1 50); do
    if curl -fsS -o /dev/null "$url" 2>/dev/null; then ok=true; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if $ok; then
    echo "   answers $url"
    kill -TERM "$pid"
    code=0
    wait "$pid" || code=$?
    # A process still waiting for MongoDB/NATS stops with 0 (clean) or 1 (start-up aborted),
    # never by the signal itself (which would be 143).
    if [ "$code" -le 1 ]; then echo "   SIGTERM: exited $code"; else FAILED+=("$svc: exit $code on SIGTERM"); fi
  else
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    tail -20 "$log"
    FAILED+=("$svc: did not answer $url")
  fi
done

if [ ${#FAILED[@]} -gt 0 ]; then
  printf 'FAIL %s\n' "${FAILED[@]}"
  exit 1
fi
echo "check-image: ${#SERVICES[@]} images laid out and started"
