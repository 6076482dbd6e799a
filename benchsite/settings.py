"""Settings, all taken from the environment (see README: Configuration).

With nothing set, the site runs with DEBUG off, a SECRET_KEY of its own kept under var/, a
SQLite file under var/ and the embedded Celery broker (a folder under var/, which the workers
scripts/run starts read), answering on loopback names only, so a newcomer needs no other
service (scripts/run turns DEBUG on for its loopback-only server).
"""

import json
from pathlib import Path

import dj_database_url
import plotly
from celery.schedules import crontab
from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from benchsite.celery import filesystem_broker
from benchsite.env import env_bool, env_int, env_list, env_str
from benchsite.secretkey import kept_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("BENCH_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", default=False)
SECRET_KEY = env_str("SECRET_KEY") or kept_secret_key(VAR_DIR / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Error pages and reports never show a password, DEBUG or not (benchsite.error_reports).
DEFAULT_EXCEPTION_REPORTER_FILTER = "benchsite.error_reports.SecretsFilter"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "csp",
    "benchsite.results",
    "benchsite.comparison",
    "benchsite.jobs",
    "benchsite.regressions",
    "benchsite.bisects",
    "benchsite.catalog",
    "benchsite.access",
    "dashboards",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    # before anything reads the path or the query: a NUL is a 400, never a database error
    "benchsite.control_characters.RefuseControlCharacters",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # before anything reads a body (CSRF reads forms): 413 over the view's limit
    "benchsite.body_limits.LimitRequestBodies",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "benchsite.access.middleware.SiteLoginMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

ROOT_URLCONF = "benchsite.urls"
WSGI_APPLICATION = "benchsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "benchsite" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "csp.context_processors.nonce",  # CSP_NONCE, for the pages' inline scripts
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
if not DATABASE_URL:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASE_URL = f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
# A persistent connection the server closed (restart, failover, pg_terminate_backend) is
# replaced at the next request instead of failing it.
connection_options = {"conn_max_age": env_int("DATABASE_CONN_MAX_AGE", 60),
                      "conn_health_checks": True}
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, **connection_options)}
# A streaming replica of it: the pages' reads go there (benchsite.replica). A test run makes
# no database for it (a mirror of default); the site's own suite leaves it out
# (tests/settings.py).
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = {**dj_database_url.parse(DATABASE_REPLICA_URL, **connection_options),
                            "TEST": {"MIRROR": "default"}}
    DATABASE_ROUTERS = ["benchsite.replica.ReplicaRouter"]
    MIDDLEWARE.insert(MIDDLEWARE.index("whitenoise.middleware.WhiteNoiseMiddleware") + 1,
                      "benchsite.replica.ReadFromReplica")
for database in DATABASES.values():
    if database["ENGINE"].endswith("postgresql"):
        # No JIT: the pages' queries are index lookups, for which compiling each plan node's
        # expressions (per partition, on the monthly partitions) cost more than it saved: the
        # latest points of 2,000 series took 1.8-3.2 s on the partitions at 10M results and
        # 1.0-1.4 s on the plain table with it, 0.7-1.6 s and 0.8-1.5 s without.
        options = database.setdefault("OPTIONS", {})
        options["options"] = f"{options.get('options', '')} -c jit=off".strip()
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The web server, the embedded worker and beat share the file: WAL lets pages read while
    # a cell's results are written, and a transaction takes the write lock when it begins
    # (waiting up to 30 s) instead of failing "database is locked" when it first writes.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL;"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Access: with BENCH_LOGIN_REQUIRED, pages need a login with the viewers role (see README:
# Recipes, configs and roles); the admin and login pages have their own login, and the API
# needs a viewer's session or a token with the read or upload scope (results.tokens).
BENCH_LOGIN_REQUIRED = env_bool("BENCH_LOGIN_REQUIRED", False)
BENCH_LOGIN_EXEMPT = ["/admin/", "/accounts/", "/api/", "/static/"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

# Failed logins (admin and site) lock the username out from that address (django-axes).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend",
                           "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("BENCH_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_int("BENCH_LOGIN_LOCKOUT_MINUTES", 15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no "AXES: BEGIN" line on every manage.py command
AXES_CLIENT_IP_CALLABLE = "benchsite.access.clients.client_address"
# Proxies in front of the site whose X-Forwarded-For is trusted (lockout and API throttles).
BENCH_TRUSTED_PROXIES = env_int("BENCH_TRUSTED_PROXIES", 0)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# plotly.js from the installed plotly package, served as /static/plotly/plotly.min.js: the
# dashboards never load it from a CDN.
STATICFILES_DIRS = [BASE_DIR / "benchsite" / "static",
                    ("plotly", Path(plotly.__file__).parent / "package_data")]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "benchsite.staticstorage.CollectedStaticFilesStorage"
    },
}
# Without collectstatic's files (tests, runserver), WhiteNoise serves the apps' own.
WHITENOISE_USE_FINDERS = DEBUG or not (STATIC_ROOT / "staticfiles.json").exists()

# Content-Security-Policy (django-csp): the site's own scripts and plotly.js (a static file),
# inline scripts only with the response's nonce. Styles may be inline: plotly.js and Swagger
# UI set them as they draw, and images may be data: URLs (Swagger UI's icons, plotly's
# "download as PNG").
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:", "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# Request bodies (benchsite.body_limits: 413 before anything reads one). Uploads: one limit
# for the body as sent and once decompressed (gzip bombs are refused). A CI job's records
# are kilobytes to a few MB; handling an upload peaks at about 6x its size (measured by
# tests/results/test_upload_limits.py), so 32 MiB bounds one web worker's request near
# 200 MB (split larger uploads).
BENCH_UPLOAD_MAX_BYTES = env_int("BENCH_UPLOAD_MAX_BYTES", 32 * 1024 * 1024)
# Every other body (job and bisect submissions, forms): a spec is at most 1 MiB
# (runner.engine.specs.MAX_SPEC_BYTES), up to 3x that as JSON with escapes.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("BENCH_REQUEST_MAX_BYTES", 4 * 1024 * 1024)

# API rate limits (benchsite.results.throttles), DRF rates such as "10000/hour"; empty: off.
# A token's budget covers CI bursts (8 parallel jobs x 1,000 uploads an hour); anonymous
# clients, counted by address, get less. Counted in Redis when the broker is Redis.
BENCH_THROTTLE_TOKEN = env_str("BENCH_THROTTLE_TOKEN", "10000/hour")
BENCH_THROTTLE_ANON = env_str("BENCH_THROTTLE_ANON", "3600/hour")

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "benchsite.results.schema.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "benchsite.results.tokens.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["benchsite.results.tokens.SiteApiAccess"],
    "DEFAULT_THROTTLE_CLASSES": ["benchsite.results.throttles.TokenRateThrottle",
                                 "benchsite.results.throttles.AnonRateThrottle"],
    # the client address is REMOTE_ADDR, or X-Forwarded-For's entry this many proxies back
    "NUM_PROXIES": BENCH_TRUSTED_PROXIES,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # `?format=csv` is ours (streamed CSV), not DRF's renderer override.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Benchmark results API",
    "DESCRIPTION": (
        "Upload and query PyTorch OSS benchmark (v3) records. Uploads need a token with the "
        "`upload` scope, job submissions one with `submit_jobs` (for its queues). On a site "
        "with BENCH_LOGIN_REQUIRED every endpoint needs a viewer's session or a token with "
        "the `read` or `upload` scope (401 without, 403 with too little); this schema and "
        "these docs stay public. Over the rate limits: 429 with Retry-After."
    ),
    "VERSION": "3",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: with no CELERY_BROKER_URL, the embedded broker (kombu's filesystem transport under
# var/, below), shared by the site, `manage.py` commands and the workers scripts/run starts;
# Redis in production. Tasks never run in-process here: only the tests' settings ask for that
# (tests/settings.py).
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://localhost/"
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Jobs: queues per device class (a worker per GPU listens on one), and per-cell limits.
BENCH_QUEUES = env_list("BENCH_QUEUES", ["cpu", "cuda"])
BENCH_JOB_REPO = env_str("BENCH_JOB_REPO", "pytorch/ao")
# Where workers write the files of cells (profiles, traces, memory snapshots): one folder per
# job and cell (jobs/JOB/CELL), per bisect and round; a spec's paths are relative to it.
BENCH_FILES_DIR = env_str("BENCH_FILES_DIR", str(VAR_DIR / "files"))
BENCH_CELL_SOFT_TIME_LIMIT = env_int("BENCH_CELL_SOFT_TIME_LIMIT", 1800)
BENCH_CELL_TIME_LIMIT = env_int("BENCH_CELL_TIME_LIMIT", BENCH_CELL_SOFT_TIME_LIMIT + 120)
# Celery starts the hard limit's clock only when the soft one fires: the hard limit must be
# the longer (a soft limit of 0 means none).
if BENCH_CELL_TIME_LIMIT <= BENCH_CELL_SOFT_TIME_LIMIT:
    raise ImproperlyConfigured(
        f"BENCH_CELL_TIME_LIMIT={BENCH_CELL_TIME_LIMIT} must exceed BENCH_CELL_SOFT_TIME_LIMIT="
        f"{BENCH_CELL_SOFT_TIME_LIMIT} (seconds)")
# What each queue's workers have (device, CUDA capability, optional packages), a JSON object;
# benchmark config validation reports the cells each queue would skip (benchsite.catalog).
BENCH_QUEUE_HARDWARE = json.loads(env_str("BENCH_QUEUE_HARDWARE") or "null") or {
    "cpu": {"device": "cpu"},
    "cuda": {"device": "cuda", "capability": "9.0", "packages": ["triton"]},
}
# A message whose worker vanished (killed -9, machine lost) is delivered again after this
# long; it must exceed the hard time limit, or a slow cell would be delivered twice.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", BENCH_CELL_TIME_LIMIT + 300)
}
# The embedded default: CELERY_BROKER_URL=filesystem://, kombu's filesystem
# transport in CELERY_BROKER_FOLDER, by default one folder per database under var/broker/, so
# two databases' workers never take each other's cells. No redelivery: a cell whose worker
# died is queued again by the sweeper (its heartbeat stops).
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS.update(filesystem_broker(Path(env_str(
        "CELERY_BROKER_FOLDER",
        str(VAR_DIR / "broker" / Path(str(DATABASES["default"]["NAME"])).name)))))
CELERY_TIMEZONE = TIME_ZONE
# The API's rate-limit counters: shared by every web process in the broker's Redis.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                 "LOCATION": CELERY_BROKER_URL, "KEY_PREFIX": "throttle"}
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"},
}
# Operations (README: Operations). Detection, notifications, reports, scheduled submissions
# and sweeps run on a queue of their own, never behind benchmark cells; every worker that
# scripts and compose start consumes it.
BENCH_CONTROL_QUEUE = env_str("BENCH_CONTROL_QUEUE", "control")
CELERY_TASK_ROUTES = {
    "benchsite.regressions.tasks.*": {"queue": BENCH_CONTROL_QUEUE},
    "benchsite.catalog.tasks.*": {"queue": BENCH_CONTROL_QUEUE},
    "benchsite.results.tasks.*": {"queue": BENCH_CONTROL_QUEUE},
    "benchsite.jobs.tasks.sweep": {"queue": BENCH_CONTROL_QUEUE},
    "benchsite.bisects.tasks.sweep": {"queue": BENCH_CONTROL_QUEUE},
}
# A running cell's worker writes a heartbeat this often; the sweeper (every
# BENCH_SWEEP_INTERVAL s) takes a cell whose heartbeat is older than BENCH_HEARTBEAT_TIMEOUT as
# orphaned, queues again the jobs whose enqueue failed (the outbox) and detection owed for
# uploads whose task was lost or failed (after BENCH_DETECTION_RETRY_AFTER s; an upload whose
# detection ran BENCH_DETECTION_MAX_ATTEMPTS times without success is given up, its last error
# kept for the admin's Uploads); a job that could not be queued for BENCH_ENQUEUE_GIVE_UP s is
# failed.
# Bisects and A/B try jobs (benchsite.bisects): each source's mirror, worktrees and builds are
# cached on the worker under BENCH_SOURCE_CACHE, within BENCH_SOURCE_CACHE_BYTES; one run of a
# commit may take BENCH_BISECT_RUN_TIMEOUT s; a comparison adds rounds up to
# BENCH_BISECT_MAX_ROUNDS a commit; ends closer than BENCH_BISECT_MIN_CHANGE (relative) do
# not reproduce a regression started from a spec (one from a regression: half its magnitude).
BENCH_SOURCE_CACHE = env_str("BENCH_SOURCE_CACHE", str(VAR_DIR / "sources"))
BENCH_SOURCE_CACHE_BYTES = env_int("BENCH_SOURCE_CACHE_BYTES", 20 * 1024**3)
BENCH_BISECT_RUN_TIMEOUT = env_int("BENCH_BISECT_RUN_TIMEOUT", 1800)
BENCH_BISECT_MAX_ROUNDS = env_int("BENCH_BISECT_MAX_ROUNDS", 6)
BENCH_BISECT_MIN_CHANGE = float(env_str("BENCH_BISECT_MIN_CHANGE", "0.05"))
BENCH_BISECT_AB_ROUNDS = env_int("BENCH_BISECT_AB_ROUNDS", 3)
BENCH_BISECT_TIME_LIMIT = env_int("BENCH_BISECT_TIME_LIMIT", 12 * 3600)
BENCH_HEARTBEAT_INTERVAL = env_int("BENCH_HEARTBEAT_INTERVAL", 30)
BENCH_HEARTBEAT_TIMEOUT = env_int("BENCH_HEARTBEAT_TIMEOUT", 3 * BENCH_HEARTBEAT_INTERVAL)
BENCH_SWEEP_INTERVAL = env_int("BENCH_SWEEP_INTERVAL", 60)
BENCH_ENQUEUE_GIVE_UP = env_int("BENCH_ENQUEUE_GIVE_UP", 24 * 3600)
BENCH_DETECTION_RETRY_AFTER = env_int("BENCH_DETECTION_RETRY_AFTER", 600)
BENCH_DETECTION_MAX_ATTEMPTS = env_int("BENCH_DETECTION_MAX_ATTEMPTS", 5)
# The hour (UTC) of the nightly maintenance that rewrites settled months of results in their
# series' order (results.partitions.order_months): reads of a month being rewritten wait.
BENCH_MAINTENANCE_HOUR = env_int("BENCH_MAINTENANCE_HOUR", 5)
# django-celery-beat's DatabaseScheduler copies these entries into its table at start.
CELERY_BEAT_SCHEDULE = {
    "jobs: sweep orphaned cells and unqueued jobs": {
        "task": "benchsite.jobs.tasks.sweep", "schedule": float(BENCH_SWEEP_INTERVAL),
        "options": {"expires": BENCH_SWEEP_INTERVAL}},  # sweeps missed meanwhile: one is enough
    "regressions: detection owed": {
        "task": "benchsite.regressions.tasks.detect_owed",
        "schedule": float(BENCH_SWEEP_INTERVAL), "options": {"expires": BENCH_SWEEP_INTERVAL}},
    # regressions held for their confirmation past its time limit: told, "unconfirmed"
    "regressions: confirmations overdue": {
        "task": "benchsite.regressions.tasks.confirmations_overdue",
        "schedule": float(BENCH_SWEEP_INTERVAL), "options": {"expires": BENCH_SWEEP_INTERVAL}},
    # bisects whose worker was lost or whose task was: queued again, or failed saying why
    "bisects: sweep lost bisects": {
        "task": "benchsite.bisects.tasks.sweep",
        "schedule": float(BENCH_SWEEP_INTERVAL), "options": {"expires": BENCH_SWEEP_INTERVAL}},
    # settled months of results rewritten in their series' order (PostgreSQL)
    "results: order settled months": {
        "task": "benchsite.results.tasks.order_months",
        "schedule": crontab(minute=17, hour=BENCH_MAINTENANCE_HOUR),
        "options": {"expires": 3600}},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# BENCH_HTTPS: the site is served over HTTPS by a proxy that terminates TLS and sets
# X-Forwarded-Proto (and drops any a client sent). Then http:// is redirected to https://,
# cookies are sent over HTTPS only and browsers are told (HSTS, for BENCH_HSTS_SECONDS,
# subdomains included, preload allowed) to use nothing else. Off by default: on a plain-HTTP
# site (scripts/run, docker compose as shipped) secure cookies would make logging in
# impossible.
BENCH_HTTPS = env_bool("BENCH_HTTPS", False)
if BENCH_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("BENCH_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# Regressions: detection after each upload (a task on the control queue; off for pure ingestion
# benchmarks), links in notifications, and the sender of alert emails. Unset, links point at
# the server `scripts/run` serves from this checkout (it writes its URL to var/site-url while
# it runs), so a second shell's commands (demo_regressions' gate lines, reports) link to it.
BENCH_DETECT_ON_UPLOAD = env_bool("BENCH_DETECT_ON_UPLOAD", True)
_SERVED_URL = VAR_DIR / "site-url"
BENCH_SITE_URL = (env_str("BENCH_SITE_URL")
                  or (_SERVED_URL.read_text().strip() if _SERVED_URL.is_file() else "")
                  or "http://localhost:8000")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "benchsite@localhost")
