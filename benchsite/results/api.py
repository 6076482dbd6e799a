"""`/api/v3/results`: one URL, GET queries results (api_query) and POST uploads them
(api_upload)."""

from __future__ import annotations

from benchsite.results.api_query import ResultList
from benchsite.results.api_upload import UploadResultsMixin


class ResultsCollection(UploadResultsMixin, ResultList):
    """GET queries results, POST uploads them."""
