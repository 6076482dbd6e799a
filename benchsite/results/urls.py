from django.urls import path

from benchsite.results import api_query
from benchsite.results.api_upload import UploadResultsMixin


class ResultsCollection(UploadResultsMixin, api_query.ResultList):
    """`/api/v3/results`: GET queries results, POST uploads them."""


urlpatterns = [
    path("results", ResultsCollection.as_view(), name="results"),
    path("runs", api_query.RunList.as_view(), name="runs"),
    path("runs/<int:pk>", api_query.RunDetail.as_view(), name="run"),
    path("uploads/<int:pk>", api_query.UploadDetail.as_view(), name="upload"),
]
