# kafkacompat broker on its embedded on-disk store.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY kafkacompat ./kafkacompat
RUN pip install --no-cache-dir . && useradd --system --home /data kafkacompat \
    && mkdir -p /data && chown kafkacompat /data
USER kafkacompat
VOLUME /data
EXPOSE 9092
ENV KAFKACOMPAT_DATA_DIR=/data KAFKACOMPAT_HOST=0.0.0.0 KAFKACOMPAT_PORT=9092
STOPSIGNAL SIGTERM
ENTRYPOINT ["kafkacompat", "serve"]
