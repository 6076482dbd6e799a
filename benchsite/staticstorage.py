"""Static files with DEBUG off: WhiteNoise's compressed files with hashed names once
`collectstatic` wrote its manifest (the Docker image); before that (tests, `runserver`),
the plain names, which WhiteNoise serves from the apps' folders (WHITENOISE_USE_FINDERS)."""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class CollectedStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def stored_name(self, name: str) -> str:
        if not self.hashed_files:  # nothing collected yet
            return name
        return super().stored_name(name)
