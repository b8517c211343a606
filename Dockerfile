# A static rolodex binary in an empty image: docker build --build-arg VERSION=$(git describe --always) -t rolodex .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/rolodex . \
 && echo 'rolodex:x:10001:10001:rolodex:/:/rolodex' > /out/passwd

FROM scratch
# CA certificates for TLS connections to a managed PostgreSQL (sslmode=verify-full).
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/rolodex /rolodex
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["/rolodex"]
CMD ["serve"]
