# The t9k-jobs operator image: docker build -t t9k-jobs:0.1.0 .
# Runs `t9k-jobs operator` by default; deploy/operator.yaml passes its own arguments.
# BASE: any Debian-like image with python3.11, venv and pip (tools/images/build.sh passes its own).

ARG BASE=python:3.11-slim
FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements/operator.txt ./requirements/
# The runtime dependencies only (no torch: the examples extra is not installed), each from uv.lock
# with its hash (requirements/operator.txt, exported by scripts/lock.sh), and the build backend.
RUN python -m venv /opt/t9k-jobs \
 && /opt/t9k-jobs/bin/pip install --require-hashes --no-deps -r requirements/operator.txt
COPY pyproject.toml README.md ./
COPY src ./src
# The package itself, built by the locked backend (no isolation: nothing else is fetched).
RUN /opt/t9k-jobs/bin/pip install --no-build-isolation --no-deps .

FROM ${BASE}
ENV PATH=/opt/t9k-jobs/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/t9k-jobs /opt/t9k-jobs
# A numeric non-root user, so Kubernetes can verify runAsNonRoot (deploy/operator.yaml uses 65532).
RUN groupadd --system --gid 65532 t9k && \
    useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin t9k
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["t9k-jobs"]
CMD ["operator"]
