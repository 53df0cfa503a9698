"""Fetch missing files of named corpora into the data root, and check every file's sha256.

The data root is read-only for tinygpt except for this download cache: a file is written only when it was
missing, only at its registered place, and only after its checksum matched. The download itself is pooch's
(the scientific-Python library for checksummed downloads): it streams to a temporary name beside the file,
checks the sha256, renames into place, and tries again after a dropped connection or a wrong checksum. A file
already present is never fetched: a changed one is refused, not replaced. On a machine without network the
error says which file to put where.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pooch

from tinygpt.data.errors import DataError
from tinygpt.data.root import DataRoot
from tinygpt.data.sources import RemoteFile

DOWNLOAD_TIMEOUT_S = 60
DOWNLOAD_RETRIES = 3  # pooch waits 1, 2, 3 s between tries
_MAX_LISTED = 5  # the PEPs are 303 files: list a few and point at the manifest for the rest


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_url(url: str, destination: Path) -> None:
    """Download url to destination with pooch's HTTP downloader. Module-level so tests can replace it (tests make
    no network calls)."""
    pooch.HTTPDownloader(timeout=DOWNLOAD_TIMEOUT_S, progressbar=False)(url, str(destination), None)


def ensure_files(root: DataRoot, files: Sequence[RemoteFile], what: str) -> list[Path]:
    """Make sure each file is present under root with its published checksum; download the missing ones.

    Returns the local paths. Raises DataError naming every file that is missing and could not be fetched
    (with its URL, where to put it and its checksum), or any file whose checksum differs.
    """
    missing = [f for f in files if not root.resolve(f.relative_path).is_file()]
    if missing:
        _download(root, missing, what)
    paths = []
    for remote in files:
        path = root.resolve(remote.relative_path)
        actual = sha256_of(path)
        if actual != remote.sha256:
            raise DataError(
                f"{path}: sha256 {actual} does not match {what} as published ({remote.sha256}, from "
                f"{remote.url}). The file was changed or is a different text: restore it, or delete it so "
                "that it is downloaded again; for your own text use data=textfile or data=textdir."
            )
        paths.append(path)
    return paths


def _download(root: DataRoot, missing: Sequence[RemoteFile], what: str) -> None:
    for index, remote in enumerate(missing):
        destination = root.resolve(remote.relative_path)
        try:
            _download_one(remote, destination)
        except DataError:
            raise
        except Exception as error:  # any failure means "offline or unreachable" to the user
            raise DataError(_offline_message(root, missing[index:], what, remote, error)) from error


def _download_one(remote: RemoteFile, destination: Path) -> None:
    created = not destination.parent.exists()  # a failed download leaves no empty folder behind either
    fetcher = pooch.create(
        path=destination.parent,
        base_url="",
        registry={destination.name: f"sha256:{remote.sha256}"},
        urls={destination.name: remote.url},
        retry_if_failed=DOWNLOAD_RETRIES,
    )
    logger = pooch.get_logger()  # its "Downloading file ..." and "will attempt again" lines: the error says it all
    level = logger.level
    logger.setLevel("WARNING")
    try:
        fetcher.fetch(destination.name, downloader=lambda url, output, _: fetch_url(url, Path(output)))
    except BaseException as error:
        if created and destination.parent.is_dir() and not any(destination.parent.iterdir()):
            destination.parent.rmdir()
        if isinstance(error, ValueError) and "hash" in str(error):  # pooch's checksum refusal, after its retries
            raise DataError(
                f"downloaded {remote.url} but its sha256 is not the expected {remote.sha256} ({DOWNLOAD_RETRIES + 1} "
                f"tries); nothing was saved. Put the right file at {destination} by hand."
            ) from None
        raise
    finally:
        logger.setLevel(level)


def _offline_message(
    root: DataRoot, still_missing: Sequence[RemoteFile], what: str, failed: RemoteFile, error: Exception
) -> str:
    """One line: what is missing, the folder looked in (and why that one), the URL tried, and the two ways to point
    at a local copy; every file of a large corpus is in its manifest, so only the first few are named."""
    where = {
        "cache": f"tinygpt's download cache {root.path} (no data.root given, $TINYGPT_DATA not set)",
        "data.root": f"data.root={root.path}",
    }.get(root.origin, f"{root.origin}={root.path}")
    named = "; ".join(
        f"{remote.url} -> {root.resolve(remote.relative_path)} (sha256 {remote.sha256})"
        for remote in still_missing[:_MAX_LISTED]
    )
    more = (
        f"; and {len(still_missing) - _MAX_LISTED} more from the same place, every name and checksum in "
        "tinygpt/data/manifests/peps.sha256"
        if len(still_missing) > _MAX_LISTED
        else ""
    )
    return (
        f"{what}: {len(still_missing)} file(s) missing in {where}, and downloading {failed.url} failed "
        f"({type(error).__name__}: {error}). Fetch them elsewhere and put each at its place ({named}{more}), or "
        f"point $TINYGPT_DATA or data.root=<folder> at a folder that already holds them"
    )
