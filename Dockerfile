# SPDX-License-Identifier: MIT
# sluice from source on Debian 12; every dependency is a Debian package.
FROM debian:12-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
      libhiredis-dev libuv1-dev libmsgpack-dev libhttp-parser-dev libssl-dev \
      libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
 && cmake --build /build -j"$(nproc)" \
 && cmake --install /build --prefix /usr/local

FROM debian:12-slim
# Runtime libraries of every binary (libhttp-parser2.9: sluice-gateway; libssl3: TLS; libcurl4:
# the worker's http: handler), redis for the compose file's redis service, curl for the health
# checks.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libhiredis0.14 libuv1 libmsgpackc2 libssl3 \
      libhttp-parser2.9 libcurl4 redis-server redis-tools ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/ /usr/local/bin/
COPY --from=build /usr/local/lib/ /usr/local/lib/
RUN ldconfig && useradd --system --no-create-home sluice \
 && mkdir -p /data && chown redis:redis /data \
 && sluice-gateway --help >/dev/null && sluice-worker --help >/dev/null
USER sluice
ENV SLUICE_REDIS_URL=redis://redis:6379
CMD ["sluice-worker", "--help"]
