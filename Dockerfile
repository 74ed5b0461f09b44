# agent-sessions container image.
#   docker build -t agent-sessions .
#   docker run -p 127.0.0.1:8080:8080 -e ALLOW_UNAUTHENTICATED=true -v agent-sessions-data:/data agent-sessions
# Without DATABASE_URL the service keeps its data in SQLite under /data. The command above
# publishes the port on the host's loopback alone and serves it without API keys: the
# service refuses to listen on 0.0.0.0 unauthenticated unless told so. To serve other
# hosts, pass -e ADMIN_API_KEY=<32+ characters> instead, and make a tenant's key with
#   docker run --rm -v agent-sessions-data:/data agent-sessions keys create --tenant acme --name app

# ---- build -------------------------------------------------------------------
FROM rust:1-bookworm AS builder
WORKDIR /app
# Never reach for a database at compile time.
ENV SQLX_OFFLINE=true

# 1. Dependencies only: build them against stub sources, so this layer is reused
#    until Cargo.toml or Cargo.lock change.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src tests/api \
 && echo 'fn main() {}' > src/main.rs \
 && : > src/lib.rs \
 && : > tests/api/main.rs \
 && cargo build --release --locked \
 && rm -rf src \
           target/release/agent-sessions* \
           target/release/deps/agent_sessions-* \
           target/release/deps/libagent_sessions-* \
           target/release/.fingerprint/agent-sessions-*

# 2. The service itself. Migrations (sqlx::migrate!) and the console's files
#    (include_bytes!) are embedded into the binary at compile time.
COPY migrations ./migrations
COPY console ./console
COPY src ./src
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin agent-sessions \
 && install -D -m 0755 target/release/agent-sessions /out/agent-sessions

# ---- runtime -----------------------------------------------------------------
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 app \
 && useradd --uid 10001 --gid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin app \
 && mkdir -p /data \
 && chown 10001:10001 /data
COPY --from=builder /out/agent-sessions /usr/local/bin/agent-sessions

USER 10001:10001
# The default SQLite file ./agent-sessions.db lands here.
WORKDIR /data
ENV LISTEN_ADDR=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz >/dev/null || exit 1
ENTRYPOINT ["agent-sessions"]
CMD ["serve"]
