# Two images from one file:
#   docker build --target web -t benchsite-web .      (Django + Celery beat, no torch)
#   docker build --target worker -t benchsite-worker . (Celery worker with torch + torchao,
#                                                      g++ and valgrind)
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md manage.py ./
COPY benchsite ./benchsite
COPY dashboards ./dashboards
COPY runner ./runner
COPY fixtures ./fixtures

FROM base AS web
RUN pip install --no-cache-dir ".[web]" \
 && DEBUG=false SECRET_KEY=collectstatic python manage.py collectstatic --no-input
# Set after pip ran: every process (gunicorn, celery, manage.py, python -m runner) imports the
# tree under /app, with its templates and static files, never the copy pip installed (celery's
# own script would import runner and dashboards from site-packages).
ENV PYTHONPATH=/app
EXPOSE 8000
CMD ["gunicorn", "benchsite.wsgi", "--preload", "--bind", "0.0.0.0:8000", "--workers", "4", "--timeout", "120"]

FROM base AS worker
# What every family needs on CPU besides Python packages: a C++ compiler (with OpenMP) for
# torch.compile's inductor backend (kernels, compilers) and valgrind for instruction counts.
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ valgrind \
 && rm -rf /var/lib/apt/lists/*
# torch is pinned in pyproject.toml; PyPI's Linux wheel of 2.13.0 is its CUDA build, which
# runs on CPU as well: one image for the cpu and cuda workers.
RUN pip install --no-cache-dir ".[web,runner]"
ENV PYTHONPATH=/app
CMD ["celery", "-A", "benchsite", "worker", "-Q", "cpu", "-c", "1", "--loglevel", "INFO"]
