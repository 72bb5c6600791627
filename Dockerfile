# syntax=docker/dockerfile:1
# kafkacompat broker on its embedded on-disk store.
# Two stages: the builder compiles the wheel (with the C record walk of produce validation) and fetches
# the dependencies' wheels; the runtime image installs those wheels and carries no compiler.

FROM python:3.11-slim AS builder
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY kafkacompat ./kafkacompat
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels kafkacompat \
    && useradd --system --home /data kafkacompat && mkdir -p /data && chown kafkacompat /data
USER kafkacompat
WORKDIR /data
VOLUME /data
# Kafka port, then the HTTP port (web console, REST proxy, /metrics, /health)
EXPOSE 9092 9644
ENV KAFKACOMPAT_DATA_DIR=/data KAFKACOMPAT_HOST=0.0.0.0 KAFKACOMPAT_PORT=9092 \
    KAFKACOMPAT_HTTP_HOST=0.0.0.0 KAFKACOMPAT_HTTP_PORT=9644
# the slim image has no curl: Python asks /health/live on the port the broker was given
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health/live' % os.environ['KAFKACOMPAT_HTTP_PORT'], timeout=4)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["kafkacompat", "serve"]
