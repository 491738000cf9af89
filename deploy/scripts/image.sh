#!/bin/sh
# Image build helper shared by deploy/Dockerfile and deploy/scripts/check-image.sh, so the
# layout a container runs from is the one a local smoke test checks (no Docker engine needed).
#
#   image.sh workspace SERVICE                     print the npm workspace of SERVICE
#   image.sh entry SERVICE                         print its process entry, relative to the root
#   image.sh assemble SERVICE BUILD DEPS OUT       lay out the runtime tree in OUT:
#       BUILD  a tree where `tsc -b <workspace>` has run (dist/ folders, .proto files)
#       DEPS   a tree where `npm ci --omit=dev --workspace <workspace>` has run
#
# POSIX sh on purpose: the build stage is Debian's dash.
set -eu

SERVICES="auth domains contacts emails campaigns suppressions webhooks analytics"

die() {
  echo "image.sh: $*" >&2
  exit 1
}

workspace_of() {
  case "$1" in
    gateway) echo gateway ;;
    '') die "SERVICE is empty: pass --build-arg SERVICE=<gateway|$(echo "$SERVICES" | tr ' ' '|')>" ;;
    *)
      for s in $SERVICES; do
        if [ "$s" = "$1" ]; then
          echo "services/$1"
          return 0
        fi
      done
      die "unknown SERVICE '$1' (expected gateway or one of: $SERVICES)"
      ;;
  esac
}

entry_of() {
  case "$1" in
    gateway) echo gateway/dist/server.js ;;
    *) echo "$(workspace_of "$1")/dist/main.js" ;;
  esac
}

assemble() {
  service=$1 build=$2 deps=$3 out=$4
  ws=$(workspace_of "$service")
  entry=$(entry_of "$service")
  [ -f "$build/$entry" ] || die "$build/$entry is missing: did tsc -b $ws run?"
  [ -d "$deps/node_modules" ] || die "$deps/node_modules is missing: did npm ci --omit=dev run?"

  mkdir -p "$out"
  cp "$deps/package.json" "$out/package.json"
  cp -R "$deps/node_modules" "$out/node_modules"

  # The workspaces the service needs are exactly the @mailfleet/* links that npm made for it:
  # the filtered `npm ci` links only the workspace and its dependency closure.
  for link in "$deps"/node_modules/@mailfleet/*; do
    [ -L "$link" ] || continue
    target=$(readlink "$link")      # ../../services/kit, ../../proto, ...
    dir=${target#../../}
    mkdir -p "$out/$dir"
    cp "$deps/$dir/package.json" "$out/$dir/package.json"
    if [ -d "$deps/$dir/node_modules" ]; then
      cp -R "$deps/$dir/node_modules" "$out/$dir/node_modules"
    fi
    # bin/: the package's command entries (auth's `mailfleet` CLI, bin/mailfleet.mjs).
    if [ -d "$build/$dir/bin" ]; then
      cp -R "$build/$dir/bin" "$out/$dir/bin"
    fi
    if [ -d "$build/$dir/dist" ]; then
      cp -R "$build/$dir/dist" "$out/$dir/dist"
      # Compiler bookkeeping is not needed at run time.
      find "$out/$dir/dist" -name '*.tsbuildinfo' -exec rm -f {} +
    fi
  done
  [ -f "$out/$entry" ] || die "$out/$entry is missing after assembly"

  # gRPC reflection loads the .proto files at run time (PROTO_ROOT = proto/).
  if [ -d "$out/proto" ]; then
    (cd "$build/proto" && find . -name '*.proto' -not -path './node_modules/*' -not -path './dist/*') |
      while read -r file; do
        mkdir -p "$out/proto/$(dirname "$file")"
        cp "$build/proto/$file" "$out/proto/$file"
      done
  fi

  # The gateway serves the built web console (static files, CONSOLE_DIR's default location).
  if [ "$service" = gateway ] && [ -d "$build/gateway/console/dist" ]; then
    mkdir -p "$out/gateway/console"
    cp -R "$build/gateway/console/dist" "$out/gateway/console/dist"
  fi

  # One stable entry for every image: `node main.js` (Node resolves the link, so
  # import.meta.url and relative imports are those of the real file).
  ln -sf "$entry" "$out/main.js"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  workspace) workspace_of "${1:-}" ;;
  entry) entry_of "${1:-}" ;;
  assemble)
    [ $# -eq 4 ] || die "usage: image.sh assemble SERVICE BUILD DEPS OUT"
    assemble "$@"
    ;;
  *) die "usage: image.sh workspace|entry|assemble ..." ;;
esac
