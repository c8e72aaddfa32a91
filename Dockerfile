# hermes-proxy: docker build -t hermes-proxy . && docker run -p 8080:8080 \
#   -e HERMES_API_KEY=my-client-key -e OPENAI_API_KEY=sk-... -v hermes:/data hermes-proxy
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HERMES_HOME=/data \
    HERMES_HOST=0.0.0.0 \
    HERMES_PORT=8080

WORKDIR /app
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY compaction ./compaction
RUN pip install . && useradd --system --uid 10001 --home-dir /data hermes \
    && mkdir -p /data && chown hermes /data

USER hermes
VOLUME ["/data"]
EXPOSE 8080
# Listening on 0.0.0.0 needs client keys (HERMES_API_KEY=KEY[:TENANT],...) or --insecure-no-auth.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('HERMES_PORT', '8080'), timeout=4)"
CMD ["hermes-proxy", "serve"]
