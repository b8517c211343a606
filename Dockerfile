# A static rolodex binary in an empty image:
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t rolodex .
#   docker run -e DATABASE_URL=postgres://... -p 8080:8080 rolodex
# `make image-check` proves the same binary static and runnable in an empty root without Docker.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG TARGETOS=linux
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/rolodex . \
 && echo 'rolodex:x:10001:10001:rolodex:/:/sbin/nologin' > /out/passwd \
 && echo 'rolodex:x:10001:' > /out/group

FROM scratch
ARG VERSION=devel
LABEL org.opencontainers.image.title="rolodex" org.opencontainers.image.version="${VERSION}"
# CA certificates for TLS connections to a managed PostgreSQL (sslmode=verify-full).
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build /out/rolodex /rolodex
USER 10001:10001
ENV ROLODEX_ADDR=:8080
EXPOSE 8080
ENTRYPOINT ["/rolodex"]
CMD ["serve"]
