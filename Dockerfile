# Container images of Marketplane's binaries, one image per binary:
#
#   docker build --build-arg BINARY=marketplane-broker --target marketplane-broker \
#     --build-arg VERSION=v0.2.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg BUILD_DATE=$(git log -1 --format=%cI) -t registry.example.com/marketplane/marketplane-broker:0.2.0 .
#
# BINARY (what is compiled) and --target (which entrypoint the image gets)
# name the same directory under cmd/; `make image` builds all five with any
# engine that reads Dockerfiles (docker, podman, buildah). The binary is
# built as `make release` builds it (hack/release: CGO_ENABLED=0, -trimpath,
# -buildvcs=false, the same -ldflags) and runs on scratch as an unprivileged
# user with a numeric UID, so that runAsNonRoot can verify it. Base images
# are named without a registry host: the engine's configured registries or
# mirrors resolve them.

# Build stage: the Go toolchain of go.mod's language version.
FROM golang:1.26 AS build
ARG BINARY
ARG VERSION=dev
ARG REVISION=unknown
ARG BUILD_DATE=unknown
# Set by BuildKit, podman and buildah for --platform; empty means the
# build host's platform.
ARG TARGETOS
ARG TARGETARCH
RUN case "${BINARY}" in \
      marketplane|marketplane-operator|marketplane-interoperator|marketplane-marketplace|marketplane-broker|marketplane-kcp-provider) ;; \
      *) echo "--build-arg BINARY must be one of marketplane, marketplane-operator, marketplane-interoperator, marketplane-marketplace, marketplane-broker, marketplane-kcp-provider (got '${BINARY}')" >&2; exit 1 ;; \
    esac
WORKDIR /src
# Modules first, so that a source change reuses the downloaded modules.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS="${TARGETOS:-linux}" GOARCH="${TARGETARCH}" \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/marketplane/marketplane/pkg/version.Version=${VERSION} -X github.com/marketplane/marketplane/pkg/version.Revision=${REVISION} -X github.com/marketplane/marketplane/pkg/version.BuildDate=${BUILD_DATE}" \
      -o "/out/bin/${BINARY}" "./cmd/${BINARY}"
# scratch has no user database: an entry for the unprivileged user, so that
# tools inside and outside the container show a name for UID 65532.
RUN mkdir -p /out/etc \
 && echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >/out/etc/passwd \
 && echo 'nonroot:x:65532:' >/out/etc/group

# Runtime base: nothing but CA certificates (for TLS to API servers and
# registries of the clusters a binary reaches), the user entry and the
# binary.
FROM scratch AS runtime
ARG BINARY
ARG VERSION=dev
ARG REVISION=unknown
ARG BUILD_DATE=unknown
LABEL org.opencontainers.image.title="${BINARY}" \
      org.opencontainers.image.description="Marketplane: managed services for many tenants on Kubernetes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.source="https://github.com/marketplane/marketplane" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etc/passwd /out/etc/group /etc/
# Only the one binary BINARY named is in /out/bin.
COPY --from=build /out/bin/ /
USER 65532:65532

# One target per binary: ENTRYPOINT takes no build arguments, so each
# binary's entrypoint has a stage of its own (select it with --target).
FROM runtime AS marketplane
ENTRYPOINT ["/marketplane"]

FROM runtime AS marketplane-operator
ENTRYPOINT ["/marketplane-operator"]

FROM runtime AS marketplane-interoperator
ENTRYPOINT ["/marketplane-interoperator"]

FROM runtime AS marketplane-marketplace
ENTRYPOINT ["/marketplane-marketplace"]

FROM runtime AS marketplane-broker
ENTRYPOINT ["/marketplane-broker"]

FROM runtime AS marketplane-kcp-provider
ENTRYPOINT ["/marketplane-kcp-provider"]
