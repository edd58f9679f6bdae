# The project's image: one image for the code location's gRPC server and for run and step workers
# (Kubernetes: deploy/k8s/values.yaml; ECS: deploy/ecs/dagster.yaml). Code and pinned dependencies
# only: no model weights, benches, candidates or instance data are baked in (ARGUS_MODELS_DIR, the
# bench and the candidate store are mounted or on S3; the instance is Postgres).
#
#   docker build -t argus-dagster:0.1.0 .
#   docker run --rm -p 4000:4000 argus-dagster:0.1.0          # the code location on :4000
FROM python:3.11-slim

# The media stack's shared libraries (OpenCV headless and decord's bundled FFmpeg need glib and OpenMP).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libglib2.0-0 libgomp1 \
 && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DAGSTER_HOME=/opt/dagster/dagster_home \
    ARGUS_HOME=/opt/dagster/argus_home

WORKDIR /opt/dagster/app

# torch first, from PyTorch's CPU wheel index at the version pyproject.toml pins (the default index
# would bring the CUDA build, about 4 GB more); GPU nodes get CUDA through a CUDA build of the same pin
# in an image of their own (see deploy/k8s/README.md). Then the project with its pinned dependencies,
# which finds torch already satisfied, and the k8s extra (dagster-k8s) for ARGUS_ENV=k8s.
ARG TORCH_VERSION=2.13.0
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==${TORCH_VERSION}"

COPY pyproject.toml README.md workspace.yaml ./
COPY argus_dagster ./argus_dagster
COPY assets ./assets
COPY resources ./resources
# rapidocr declares the GUI build of OpenCV, which clashes with opencv-python-headless: as the Makefile
# does, its other dependencies come from pyproject.toml and the package itself goes in without them.
RUN pip install ".[k8s]" \
 && pip install --no-deps rapidocr-onnxruntime==1.4.4 \
 && python -c "import dagster, dagster_aws, dagster_k8s, dagster_postgres, cv2, decord, torch, rapidocr_onnxruntime, argus_dagster.location"

# A user of its own, with the only folders it writes.
RUN useradd --create-home --uid 10001 argus \
 && mkdir -p "$DAGSTER_HOME" "$ARGUS_HOME" \
 && chown -R argus:argus "$DAGSTER_HOME" "$ARGUS_HOME"
USER 10001

EXPOSE 4000
# No ENTRYPOINT: Kubernetes' run and step Jobs (dagster-k8s) set the container's args and ECS's run
# tasks its command to `dagster api execute_run ...` / `dagster api execute_step ...`, which must run as
# given. The default command serves the code location (the Helm chart's user deployment replaces it
# with `dagster api grpc ...` and the same module).
CMD ["dagster", "code-server", "start", "-h", "0.0.0.0", "-p", "4000", "-m", "argus_dagster.location"]
