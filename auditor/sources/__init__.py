"""Inputs -> source files: directories, wheels/zips, sdists, installed distributions, site-packages
and git revisions.

One provider per kind (:mod:`.directory`, :mod:`.archives`, :mod:`.git`), each yielding
:class:`~auditor.model.SourceFile` records, or :class:`~.files.LazyFile` handles that a worker
reads itself, and :class:`~auditor.model.FileError`\\ s for files it could not read;
:mod:`.choose` picks the provider for what the user named. Archives are read in memory:
nothing is extracted to disk, nothing scanned is imported or executed, and hostile member paths
(absolute, ``..``) are refused.
"""

from auditor.sources.archives import TarProvider, ZipProvider
from auditor.sources.choose import download, provider_for, providers, read_all
from auditor.sources.directory import DirectoryProvider, InstalledProvider, SingleFileProvider, site_packages
from auditor.sources.files import (
    MAX_BINARY_BYTES,
    MAX_FILE_BYTES,
    MAX_MANIFEST_BYTES,
    Filters,
    InputError,
    Item,
    LazyFile,
    Origin,
    Provider,
    ReadError,
    close_archives,
    language_of,
    max_bytes,
    open_file,
    open_origin,
    read_file,
    read_origin,
    wanted,
)
from auditor.sources.git import GitRevisionProvider

__all__ = [
    "MAX_BINARY_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_FILE_BYTES",
    "DirectoryProvider",
    "Filters",
    "GitRevisionProvider",
    "InputError",
    "InstalledProvider",
    "Item",
    "LazyFile",
    "Origin",
    "Provider",
    "ReadError",
    "SingleFileProvider",
    "TarProvider",
    "ZipProvider",
    "close_archives",
    "download",
    "language_of",
    "max_bytes",
    "open_file",
    "open_origin",
    "provider_for",
    "providers",
    "read_all",
    "read_file",
    "read_origin",
    "site_packages",
    "wanted",
]
