#!/bin/sh
# The real-Pulumi check (docs/infra.md, "The real-Pulumi check"): builds the pulumi CLI at go.mod's
# sdk version from the Go module proxy, once, into a cache folder (a temporary module outside the
# repository; its version stamped with -ldflags, as the release build does), then runs
# infra/realpulumi's test with it. Nothing is written to the repository.
set -eu
V=3.276.0
root=${RIG_REALPULUMI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rig/pulumi-v$V}
if [ ! -x "$root/bin/pulumi" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "building the pulumi CLI v$V from the Go module proxy into $root (about 10 min on 2 cores)" >&2
	(
		cd "$tmp"
		go mod init pulumicli >/dev/null 2>&1
		GOFLAGS=-mod=mod go get "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@v$V"
		nice -n 19 go build -o "$root/bin/pulumi" \
			-ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$V" \
			github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
	)
fi
cd "$(dirname "$0")/../.."
RIG_PULUMI="$root/bin/pulumi" exec go test -count=1 -v -run TestRealPulumi ./infra/realpulumi/
