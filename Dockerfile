# kafkacompat broker on its embedded on-disk store.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY kafkacompat ./kafkacompat
# gcc only while installing: it builds the C record walk of produce validation
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \
    && pip install --no-cache-dir . \
    && apt-get purge -y -qq gcc >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /data kafkacompat && mkdir -p /data && chown kafkacompat /data
USER kafkacompat
VOLUME /data
EXPOSE 9092
ENV KAFKACOMPAT_DATA_DIR=/data KAFKACOMPAT_HOST=0.0.0.0 KAFKACOMPAT_PORT=9092
STOPSIGNAL SIGTERM
ENTRYPOINT ["kafkacompat", "serve"]
