import importlib
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
application = get_wsgi_application()
# Import the URLconf, and with it every view, now rather than in each worker's first request
# (about 0.6 s); under `gunicorn --preload` the workers inherit it.
importlib.import_module(settings.ROOT_URLCONF)
