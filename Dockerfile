# SPDX-License-Identifier: MIT
# sluice from source on Debian 12; every dependency is a Debian package.
FROM debian:12-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
      libhiredis-dev libuv1-dev libmsgpack-dev libhttp-parser-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
 && cmake --build /build -j"$(nproc)" \
 && cmake --install /build --prefix /usr/local

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libhiredis0.14 libuv1 libmsgpackc2 \
      redis-server redis-tools ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/ /usr/local/bin/
RUN useradd --system --no-create-home sluice
USER sluice
ENV SLUICE_REDIS_URL=redis://redis:6379
CMD ["sluice-worker", "--help"]
