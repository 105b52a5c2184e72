#!/usr/bin/env bash
# Builds deploy/sidecar/Dockerfile as localhost/whguard:dev and the example
# backend as localhost/whguard-orders:dev with Podman, never pulling.
#
# The recipe's only base image is the Go toolchain (golang:1.26; the final
# stage is FROM scratch). When it is not in local storage (no registry is
# reachable from the CI machines), a stand-in is made from the installed
# Go toolchain, a shell and the host's CA certificates, and passed as
# GO_IMAGE; the module and build caches of the host are mounted into the
# build, so nothing is downloaded from the container. Run through
# .ci/with-podman.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

image=${IMAGE:-localhost/whguard:dev}
orders_image=${ORDERS_IMAGE:-localhost/whguard-orders:dev}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(git rev-parse HEAD 2>/dev/null || true)

go_image=${GO_IMAGE:-}
if [ -z "$go_image" ]; then
  if podman image exists docker.io/library/golang:1.26; then
    go_image=docker.io/library/golang:1.26
  else
    goroot=$(go env GOROOT)
    gover=$(go env GOVERSION)
    # Bump the revision when the stand-in's contents change.
    go_image=localhost/whguard-go-standin:$gover-r2
    if ! podman image exists "$go_image"; then
      echo "build-images: making $go_image from $goroot (no golang image in local storage)" >&2
      stage=$(mktemp -d /tmp/whguard-go-standin.XXXXXX)
      trap 'rm -rf "$stage"' EXIT
      mkdir -p "$stage/usr/local" "$stage/bin" "$stage/tmp" "$stage/root" "$stage/etc/ssl/certs" "$stage/go"
      chmod 1777 "$stage/tmp"
      cp -a "$goroot" "$stage/usr/local/go"
      # RUN needs /bin/sh: dash and the libraries it links.
      cp -L /bin/dash "$stage/bin/sh"
      for lib in $(ldd /bin/dash | grep -o '/[^ ]*'); do
        mkdir -p "$stage$(dirname "$lib")"; cp -L "$lib" "$stage$lib"
      done
      cp -L /etc/ssl/certs/ca-certificates.crt "$stage/etc/ssl/certs/"
      # A root user with HOME=/root, as in the golang image (Go's build
      # cache is $HOME/.cache/go-build, where the host's is mounted).
      printf 'root:x:0:0:root:/root:/bin/sh\n' > "$stage/etc/passwd"
      printf 'root:x:0:\n' > "$stage/etc/group"
      tar -C "$stage" -c . | podman import \
        --change 'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV GOPATH=/go' --change 'ENV GOTOOLCHAIN=local' --change 'ENV GOPROXY=off' \
        --change 'ENV GOFLAGS=-mod=mod' \
        --change 'WORKDIR /go' - "$go_image" >/dev/null
    fi
  fi
fi

# The module cache must hold every module the build needs (GOPROXY=off in
# the stand-in): fill it from the host, which may reach the module proxy.
go mod download
cache=(-v "$(go env GOMODCACHE):/go/pkg/mod" -v "$(go env GOCACHE):/root/.cache/go-build")

podman build --pull=never --format docker -f deploy/sidecar/Dockerfile "${cache[@]}" \
  --build-arg GO_IMAGE="$go_image" --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -t "$image" .
podman build --pull=never --format docker -f examples/backends/orders/Dockerfile "${cache[@]}" \
  --build-arg GO_IMAGE="$go_image" -t "$orders_image" .
echo "build-images: $image ($version) and $orders_image, toolchain $go_image" >&2
