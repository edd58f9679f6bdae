"""Reading and writing local paths and ``s3://bucket/key`` URIs through one interface.

Everything the evaluation reads or writes outside its tables (the bench, the candidate store, the
content cache, frozen rubrics, reports) is named by a *location*: a local path or an ``s3://`` URI.
:class:`Storage` reads, writes, lists, fetches and links both; the code above it never asks which one
it has. The S3 client comes from the ``storage`` resource (:mod:`resources.storage`), whose storage
is passed to whatever reads or writes a location; code handed none reads local paths only
(:data:`LOCAL`).

**Content hashes.** A video's content hash is the sha256 of its bytes, whatever holds it. An S3
object's ETag is only a change hint: :meth:`Storage.sha256` remembers the sha256 per (key, ETag,
size), in the process and in the ``hashes`` namespace of the content cache when one is configured, so
an unchanged object is hashed (and downloaded) once, not on every listing.

**Local copies.** Decoders read files: :meth:`Storage.fetch` downloads an object once into the media
cache (:func:`s3_cache_path`: the bucket and key are data and never leave the cache folder) and
fetches it again only when its ETag changed.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote

from argus_dagster.infra.cache import ContentCache, cache_key
from argus_dagster.infra.files import WriteError, write_atomic
from argus_dagster.infra.names import file_name
from argus_dagster.infra.settings import report_url

SCHEME = "s3://"


class StorageError(RuntimeError):
    """A location that cannot be reached (no S3 storage configured, an unknown bucket)."""


def is_remote(location: str | Path) -> bool:
    return str(location).startswith(SCHEME)


def join(base: str | Path, *parts: str) -> str:
    """``base`` and ``parts`` joined with ``/`` (an S3 URI keeps its ``s3://``)."""
    base = str(base)
    if is_remote(base):
        out = base.rstrip("/")
        for p in parts:
            out += "/" + str(p).strip("/")
        return out
    return str(Path(base).joinpath(*parts))


def parent(location: str | Path) -> str:
    """The folder (or ``s3://`` prefix) ``location`` is in."""
    location = str(location)
    if is_remote(location):
        head, _, _ = location.rstrip("/").rpartition("/")
        return head if len(head) > len(SCHEME) else location
    return str(Path(location).parent)


def is_relative(location: str | Path) -> bool:
    """A location named relative to a folder (as metadata records a table, relative to its evaluation)."""
    return not is_remote(location) and not Path(location).is_absolute()


def relative(location: str | Path, root: str | Path) -> str:
    """``location`` named relative to the folder (or prefix) ``root`` it lies under, as metadata records
    it; a location outside ``root`` as it is."""
    location, root = str(location), str(root).rstrip("/")
    return location[len(root) + 1:] if root and location.startswith(root + "/") else location


def split(uri: str) -> tuple[str, str]:
    """``(bucket, key)`` of ``s3://bucket/key``."""
    bucket, _, key = str(uri)[len(SCHEME):].partition("/")
    if not bucket:
        raise StorageError(f"{uri}: expected s3://bucket/key")
    return bucket, key


def s3_cache_path(uri: str, cache_dir: str | Path) -> Path:
    """Where the local copy of ``s3://bucket/key`` lives under ``cache_dir``: always inside it.

    The bucket and key are data: each is mapped through :func:`~.names.file_name` as one entry
    (``..``, a leading ``/`` or a separator in a key cannot leave the folder), and the key's suffix
    is kept so decoders still know the format.
    """
    bucket, _, key = str(uri)[len(SCHEME):].partition("/")
    if not bucket or not key:
        raise StorageError(f"{uri}: expected s3://bucket/key")
    name, suffix = file_name(key), Path(key).suffix
    if suffix and len(suffix) <= 8 and not name.endswith(suffix):
        name += suffix
    return Path(cache_dir) / "s3" / file_name(bucket) / name


@dataclass(frozen=True)
class StoredObject:
    """One file or object under a listed prefix: its location, its path relative to the prefix (``/``
    separated), a cheap change token (local: size and mtime; S3: ETag and size) and its size."""

    uri: str
    rel: str
    token: str
    size: int


def _sha256_file(path: str | Path) -> str:
    if not stat.S_ISREG(os.stat(path).st_mode):  # never opens a FIFO or a device (opening one blocks)
        raise OSError(f"{path}: not a regular file")
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class Storage:
    """Local paths always; ``s3://`` URIs with a client (``client_factory`` makes it once, lazily).

    ``cache_dir``: where objects are fetched to (default: the system's temporary folder);
    ``hash_index``: a content-cache location that remembers sha256 per (key, ETag, size) across
    processes; ``presign_expiry_s``: how long a link to an object stays valid; ``reports_url``: the
    base URL of the reports server, for links to local report pages; ``evaluation_dir``: the folder
    (or ``s3://`` prefix) of the evaluation this storage serves, which the locations recorded in its
    materializations' metadata are relative to (:meth:`resolve`).
    """

    def __init__(self, client_factory: Callable[[], Any] | None = None, *, cache_dir: str | Path | None = None,
                 hash_index: str | None = None, presign_expiry_s: int = 7 * 24 * 3600,
                 reports_url: str | None = None, evaluation_dir: str | Path | None = None):
        self._factory = client_factory
        self.evaluation_dir = str(evaluation_dir) if evaluation_dir else ""
        self._client = None
        self._lock = threading.Lock()
        self.cache_dir = str(cache_dir) if cache_dir else ""
        self.hash_index = hash_index or ""
        self.presign_expiry_s = int(presign_expiry_s)
        self.reports_url = reports_url
        self._hashes: dict[tuple[str, str, int], str] = {}
        self._index = None

    def resolve(self, location: str | Path) -> str:
        """Where a recorded location is: a relative one under :attr:`evaluation_dir`, an absolute path
        or ``s3://`` URI as it is. A relative one is never read against the working folder: a storage
        that serves no evaluation raises :class:`StorageError` naming the setting."""
        if not is_relative(location):
            return str(location)
        if not self.evaluation_dir:
            raise StorageError(f"{location}: a location recorded relative to its evaluation needs the storage's "
                               "evaluation_dir (the storage resource's evaluation_dir setting)")
        return join(self.evaluation_dir, str(location))

    # ------------------------------------------------------------------ S3 access

    @property
    def client(self):
        with self._lock:
            if self._client is None:
                if self._factory is None:
                    raise StorageError("an s3:// location needs the storage resource's S3 client "
                                       "(ARGUS_ENV=aws, or a StorageResource in the run's resources)")
                self._client = self._factory()
            return self._client

    def _missing(self, exc: Exception) -> bool:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code in ("404", "NoSuchKey", "NotFound")

    def _head(self, uri: str) -> dict | None:
        bucket, key = split(uri)
        try:
            return self.client.head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if self._missing(exc):
                return None
            raise

    # ------------------------------------------------------------------ reading and writing

    def read_bytes(self, uri: str | Path) -> bytes:
        """The bytes at ``uri``; :class:`FileNotFoundError` when there is nothing."""
        uri = str(uri)
        if not is_remote(uri):
            return Path(uri).read_bytes()
        bucket, key = split(uri)
        try:
            return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as exc:
            if self._missing(exc):
                raise FileNotFoundError(uri) from None
            raise

    def read_text(self, uri: str | Path) -> str:
        return self.read_bytes(uri).decode("utf-8")

    def write_bytes(self, uri: str | Path, data: bytes | str) -> Path | str:
        """Write ``data`` whole (locally a temporary name, then a rename; on S3 one PUT) and return
        the location (a :class:`~pathlib.Path` for a file); a failure is one
        :class:`~argus_dagster.infra.files.WriteError` line naming it."""
        uri = str(uri)
        if not is_remote(uri):
            return write_atomic(uri, data)
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        bucket, key = split(uri)
        kind = {".html": "text/html; charset=utf-8", ".json": "application/json", ".png": "image/png"}.get(
            Path(key).suffix.lower(), "application/octet-stream")
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=raw, ContentType=kind)
        except StorageError:
            raise
        except Exception as exc:
            raise WriteError(None, f"cannot write {uri}: {exc}") from None
        return uri

    def remove(self, uri: str | Path) -> None:
        """Remove the file or object at ``uri`` (nothing there is not an error)."""
        uri = str(uri)
        if not is_remote(uri):
            Path(uri).unlink(missing_ok=True)
            return
        bucket, key = split(uri)
        try:
            self.client.delete_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if not self._missing(exc):
                raise

    def exists(self, uri: str | Path) -> bool:
        uri = str(uri)
        if not is_remote(uri):
            return Path(uri).is_file()
        return self._head(uri) is not None

    def is_dir(self, uri: str | Path) -> bool:
        """A local folder, or an S3 prefix with at least one object under it."""
        uri = str(uri)
        if not is_remote(uri):
            return Path(uri).is_dir()
        return next(self.list(uri), None) is not None

    def list(self, prefix: str | Path) -> Iterator[StoredObject]:
        """Every file under ``prefix`` (a folder or an S3 prefix), recursively, sorted by path; files
        being written (``*.part``) are left out."""
        prefix = str(prefix)
        if not is_remote(prefix):
            root = Path(prefix)
            if not root.is_dir():
                return
            for p in sorted(root.rglob("*")):
                if p.is_file() and not p.name.endswith(".part"):
                    st = p.stat()
                    yield StoredObject(str(p), p.relative_to(root).as_posix(), f"{st.st_size}:{st.st_mtime_ns}",
                                       st.st_size)
            return
        bucket, key = split(prefix)
        base = key.rstrip("/") + "/" if key.strip("/") else ""
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(base):]
                if not rel or rel.endswith("/"):
                    continue
                yield StoredObject(f"{SCHEME}{bucket}/{obj['Key']}", rel,
                                   f"{obj['ETag'].strip(chr(34))}:{obj['Size']}", int(obj["Size"]))

    def folders(self, prefix: str | Path) -> builtins.list[str]:
        """The names of the folders directly under ``prefix`` (an S3 prefix: the common prefixes one
        delimited listing returns, without listing what lies below them), sorted."""
        prefix = str(prefix)
        if not is_remote(prefix):
            root = Path(prefix)
            return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        bucket, key = split(prefix)
        base = key.rstrip("/") + "/" if key.strip("/") else ""
        out = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base, Delimiter="/"):
            out += [c["Prefix"][len(base):].rstrip("/") for c in page.get("CommonPrefixes", [])]
        return sorted(n for n in out if n)

    # ------------------------------------------------------------------ local copies and hashes

    def fetch(self, uri: str | Path, cache_dir: str | Path | None = None) -> str:
        """A local file with the bytes of ``uri``: the path itself, or the object downloaded into the
        media cache (again only when its ETag changed). A missing object is :class:`FileNotFoundError`."""
        uri = str(uri)
        if not is_remote(uri):
            return uri
        bucket, key = split(uri)
        target = s3_cache_path(uri, cache_dir or self.cache_dir or tempfile.gettempdir())
        head = self._head(uri)
        if head is None:
            raise FileNotFoundError(uri)
        token = f"{head['ETag'].strip(chr(34))}:{head['ContentLength']}"
        seen = target.with_name(f".{target.name}.etag")
        try:
            if target.is_file() and seen.read_text() == token:
                return str(target)
        except OSError:
            pass
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident():x}.part")
        try:
            self.client.download_file(bucket, key, str(tmp))
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                tmp.unlink()
        write_atomic(seen, token)
        etag, _, size = token.rpartition(":")
        self._remember(uri, etag, int(size), _sha256_file(target))
        return str(target)

    def local_copy(self, prefix: str | Path) -> Path:
        """A local folder with the files under ``prefix``: the folder itself, or for an S3 prefix a copy
        in the media cache, kept in step by ETag (changed objects fetched again, removed ones removed).
        Keys with ``.``, ``..`` or empty segments are left out, so nothing lands outside the copy."""
        prefix = str(prefix)
        if not is_remote(prefix):
            return Path(prefix)

        bucket, key = split(prefix)
        root = Path(self.cache_dir or tempfile.gettempdir()) / "copies" / file_name(bucket) / file_name(key.strip("/") or "-")
        index_path = root.with_name(f".{root.name}.index.json")
        try:
            before = json.loads(index_path.read_text())
        except (OSError, ValueError):
            before = {}
        now: dict[str, str] = {}
        for obj in self.list(prefix):
            parts = obj.rel.split("/")
            if any(p in ("", ".", "..") for p in parts):
                continue
            target = root.joinpath(*parts)
            now[obj.rel] = obj.token
            if before.get(obj.rel) == obj.token and target.is_file():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident():x}.part")
            try:
                self.client.download_file(bucket, obj.uri[len(SCHEME) + len(bucket) + 1:], str(tmp))
                os.replace(tmp, target)
            finally:
                if tmp.exists():
                    tmp.unlink()
            etag, _, size = obj.token.rpartition(":")
            self._remember(obj.uri, etag, int(size), _sha256_file(target))
        for rel in set(before) - set(now):
            try:
                root.joinpath(*rel.split("/")).unlink()
            except OSError:
                pass
        write_atomic(index_path, json.dumps(now))
        return root

    def _hash_cache(self):
        if self._index is None and self.hash_index:

            self._index = ContentCache(self.blobs(self.hash_index), "hashes")
        return self._index

    def _remember(self, uri: str, etag: str, size: int, digest: str) -> None:
        self._hashes[(uri, etag, size)] = digest
        index = self._hash_cache()
        if index is not None:

            index.put(cache_key(uri=uri, etag=etag, size=size), {"sha256": digest})

    def sha256(self, uri: str | Path, token: str | None = None) -> str:
        """The sha256 of the bytes at ``uri``. For an object, remembered per (key, ETag, size):
        ``token`` (``<etag>:<size>``, from a listing) saves asking for them."""
        uri = str(uri)
        if not is_remote(uri):
            return _sha256_file(uri)
        if token is None:
            head = self._head(uri)
            if head is None:
                raise FileNotFoundError(uri)
            token = f"{head['ETag'].strip(chr(34))}:{head['ContentLength']}"
        etag, _, size = token.rpartition(":")
        key = (uri, etag, int(size or 0))
        if key in self._hashes:
            return self._hashes[key]
        index = self._hash_cache()
        if index is not None:

            got = index.get(cache_key(uri=uri, etag=etag, size=int(size or 0)))
            if isinstance(got, dict) and isinstance(got.get("sha256"), str):
                self._hashes[key] = got["sha256"]
                return got["sha256"]
        path = self.fetch(uri)  # remembers the hash of what it downloaded
        digest = self._hashes.get(key)
        if digest is None:  # the object changed between the listing and the download
            digest = _sha256_file(path)
        return digest

    def blobs(self, location: str) -> "StorageBlobStore":
        """A content-cache store (:class:`~argus_dagster.infra.cache.BlobStore`) at ``location`` of this storage."""
        return StorageBlobStore(location, self)

    # ------------------------------------------------------------------ links

    def link(self, uri: str | Path, reports_dir: str | Path | None = None) -> str:
        """A link a person can open: a presigned HTTPS URL for an object (valid ``presign_expiry_s``),
        the reports server's URL (``reports_url``) for a file under ``reports_dir``, else a ``file://``
        URL (also for any file when this storage was made without a reports server's URL)."""
        uri = str(uri)
        if is_remote(uri):
            bucket, key = split(uri)
            return self.client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                                      ExpiresIn=self.presign_expiry_s)
        if not reports_dir or not self.reports_url:
            return Path(uri).resolve().as_uri()
        return report_url(uri, Path(reports_dir), self.reports_url)

    def links_in(self, folder: str | Path, names: builtins.list[str],
                 reports_dir: str | Path | None = None) -> builtins.list[str]:
        """:meth:`link` of each file ``names`` (plain names) in ``folder``. For a local folder the
        first file's link is made whole and the others' differ only in the percent-encoded name, so a
        thousand pages cost one path resolution, not a thousand."""
        if not names or is_remote(str(folder)):
            return [self.link(join(folder, n), reports_dir) for n in names]
        first = self.link(join(folder, names[0]), reports_dir)
        base = first[:len(first) - len(quote(names[0]))]
        return [first] + [base + quote(n) for n in names[1:]]


class StorageBlobStore:
    """A content-cache store (:class:`~argus_dagster.infra.cache.BlobStore`) at any location of a storage."""

    def __init__(self, location: str, storage: Storage):
        self.location = str(location)
        self.storage = storage

    def read(self, name: str) -> bytes | None:
        try:
            return self.storage.read_bytes(join(self.location, name))
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes) -> None:
        self.storage.write_bytes(join(self.location, name), data)


# Local paths only: what library code reads through when it is handed no storage. It has no S3
# client, so an ``s3://`` URI given to it says that the storage resource's storage is needed.
LOCAL = Storage()


__all__ = ["Storage", "StorageError", "StoredObject", "StorageBlobStore", "LOCAL", "is_remote",
           "join", "parent", "relative", "is_relative", "split", "s3_cache_path"]
