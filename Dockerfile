# syntax=docker/dockerfile:1

# Build stage: the agenthost binary, in release mode.
FROM rust:1.95-bookworm AS builder
# Guests (examples/, tests/fixtures/) build for wasm32-wasip2; the host does not
# need the target, but having it lets this stage run the e2e tests as well.
RUN rustup target add wasm32-wasip2
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p agenthost \
 && install -D -m 0755 target/release/agenthost /out/agenthost

# Runtime stage: the binary alone, as a non-root user, state in /data.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 agenthost \
 && useradd --system --uid 10001 --gid agenthost --home-dir /data --shell /usr/sbin/nologin agenthost \
 && mkdir -p /data \
 && chown agenthost:agenthost /data
COPY --from=builder /out/agenthost /usr/local/bin/agenthost
USER agenthost
WORKDIR /data
VOLUME /data
EXPOSE 8080
# The server stops cleanly on SIGTERM (docker stop).
ENTRYPOINT ["agenthost"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--data-dir", "/data"]
