"""Where the evaluation's files and tables live: local paths and ``s3://`` URIs through one resource.

:class:`StorageResource` has dagster-aws's :class:`~dagster_aws.s3.S3Resource` configuration (endpoint,
region, credentials from the standard AWS variables or the config), makes its S3 client with that
class when an ``s3://`` URI is first used (so a process that never touches S3, such as every run of
the ``local`` environment, does not import dagster-aws and its start-up cost: docs/performance.md), and adds
what the project asks of storage
(:class:`argus_dagster.infra.storage.Storage`): read, write, list, fetch to the media cache, a sha256 per
object remembered by ETag, and a link a person can open (a presigned URL for an object). It is the
only place an S3 client is made. :class:`StorageIOManager` stores the tables as parquet files through
it, at a folder or an S3 prefix alike, and keeps every materialization's table readable (a copy
per version under ``_versions/``, the latest ``keep_versions`` of each asset partition).
"""

from __future__ import annotations

import hashlib
import io
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

import dagster as dg
import polars as pl
from pydantic import Field

from argus_dagster.infra import storage as storage_lib
from argus_dagster.infra.frame_pool import FRAME_POOL
from argus_dagster.infra.names import file_name
from argus_dagster.infra.tables import recorded_path, recorded_version

# The Storage of each configuration: a process cache, not the resource's own, because Dagster builds a
# run's resources anew for every run while the S3 client (its connection pool) and the hashes it
# remembers by ETag serve every run, step and thread of the process. Bound: the 8 configurations used
# last (a process serves one evaluation, whose storage is one configuration).
_STORAGES: OrderedDict[str, storage_lib.Storage] = OrderedDict()
_KEPT_STORAGES = 8
_S3_FIELDS = ("use_unsigned_session", "region_name", "endpoint_url", "max_attempts", "profile_name", "use_ssl",
              "verify", "aws_access_key_id", "aws_secret_access_key", "aws_session_token")
_LOCK = threading.Lock()


class StorageResource(dg.ConfigurableResource):
    """Local paths and ``s3://bucket/prefix`` URIs alike (see :mod:`argus_dagster.infra.storage`).

    The S3 fields are :class:`~dagster_aws.s3.S3Resource`'s, passed to it to make the client
    (``endpoint_url`` for MinIO or a test server, ``region_name``; credentials from
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` unless set here, as ``dg.EnvVar``).
    ``media_cache_dir``: where objects are fetched for decoding; ``hash_index``: a content-cache
    location that remembers each object's sha256 by ETag; ``presign_expiry_s``: how long a link in
    the metadata opens the page.
    """

    use_unsigned_session: bool = Field(default=False, description="Use an unsigned S3 session.")
    region_name: str | None = Field(default=None, description="The S3 session's region.")
    endpoint_url: str | None = Field(default=None, description="A custom S3 endpoint (MinIO, a test server).")
    max_attempts: int = Field(default=5, description="Boto3's maximum attempts per call, the first included.")
    profile_name: str | None = Field(default=None, description="The AWS profile of the session.")
    use_ssl: bool = Field(default=True, description="Whether to use SSL.")
    verify: bool | None = Field(default=None, description="Whether to verify SSL certificates (default: yes).")
    aws_access_key_id: str | None = Field(default=None, description="AWS access key ID (default: the environment's).")
    aws_secret_access_key: str | None = Field(default=None, description="AWS secret access key.")
    aws_session_token: str | None = Field(default=None, description="AWS session token.")
    media_cache_dir: str = ""
    hash_index: str = ""
    presign_expiry_s: int = 7 * 24 * 3600
    reports_url: str = ""
    evaluation_dir: str = Field(default="", description="The evaluation's folder or s3:// prefix: the tables its "
                                "materializations record (relative to it) are read there.")
    frame_pool_mb: float = Field(default=512, ge=0, description="Decoded frames kept per process, in MB "
                                 "(the process's frame pool, argus_dagster.infra.frame_pool.FRAME_POOL).")

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        FRAME_POOL.set_budget(int(self.frame_pool_mb * 2**20))

    def get_client(self):
        """An S3 client made by dagster-aws's ``S3Resource`` from this configuration."""
        from dagster_aws.s3 import S3Resource  # deferred: start-up time of every run that never touches S3

        return S3Resource(**{k: getattr(self, k) for k in _S3_FIELDS}).get_client()

    def storage(self) -> storage_lib.Storage:
        """This configuration's :class:`~argus_dagster.infra.storage.Storage`, one per process (its S3 client
        and its remembered hashes are shared by every step and thread)."""
        key = self.model_dump_json()
        with _LOCK:
            if key not in _STORAGES:
                _STORAGES[key] = storage_lib.Storage(self.get_client, cache_dir=self.media_cache_dir or None,
                                                     hash_index=self.hash_index or None,
                                                     presign_expiry_s=self.presign_expiry_s,
                                                     reports_url=self.reports_url or None,
                                                     evaluation_dir=self.evaluation_dir or None)
                while len(_STORAGES) > _KEPT_STORAGES:
                    _STORAGES.popitem(last=False)
            _STORAGES.move_to_end(key)
            return _STORAGES[key]

    # What assets ask; each is the storage's method of the same name.
    def read_bytes(self, uri: str) -> bytes:
        return self.storage().read_bytes(uri)

    def write_bytes(self, uri: str, data: bytes | str) -> Path | str:
        return self.storage().write_bytes(uri, data)

    def exists(self, uri: str) -> bool:
        return self.storage().exists(uri)

    def list(self, prefix: str):
        return self.storage().list(prefix)

    def fetch(self, uri: str, cache_dir: str | None = None) -> str:
        return self.storage().fetch(uri, cache_dir)

    def sha256(self, uri: str) -> str:
        return self.storage().sha256(uri)

    def link(self, uri: str, reports_dir: str | None = None) -> str:
        return self.storage().link(uri, reports_dir)


VERSIONS = "_versions"  # under base_dir: a folder per asset partition of its materializations' tables
DEFAULT_KEEP_VERSIONS = 10


class StorageIOManager(dg.ConfigurableIOManager):
    """Tables as parquet files under ``base_dir`` (a folder or ``s3://bucket/prefix``), written and read
    through the storage resource: ``<asset>.parquet``, or ``<asset>/<partition>.parquet`` per partition
    (the layout of dagster-polars' parquet IO manager). Each output records its ``path``; the output
    of a run of many partitions (``{partition: table}``) records ``paths``, a file per partition.
    Recorded locations are relative to the evaluation's folder, ``base_dir``'s parent
    (``storage/criterion_scores/T2V/noisy.parquet``): the records read the same wherever the
    evaluation's folder or bucket is, and a reader resolves them against the evaluation it serves.

    Nothing a materialization stored is lost to the next one: each table is also written to
    ``_versions/<asset>/<partition...>/<time>-<run>-<content>.parquet`` (recorded as ``stored_version``,
    ``stored_versions`` for a run of many partitions), and of those each asset partition keeps its
    latest ``keep_versions`` (0: all); ``argus history`` and ``argus diff`` read them."""

    storage: StorageResource
    base_dir: str
    keep_versions: int = Field(default=DEFAULT_KEEP_VERSIONS, ge=0,
                               description="Tables kept per asset partition, the latest materializations' (0: all).")

    @staticmethod
    def _parts(asset_key: dg.AssetKey, partition: str | None, multi: bool = False) -> list[str]:
        parts = [file_name(p) for p in asset_key.path]
        if partition is not None:  # a task x model key (``m|T2V``) is one folder per dimension, as dagster-polars lays it out
            parts += [file_name(k) for k in (str(partition).split("|") if multi else [str(partition)])]
        return parts

    def _path(self, asset_key: dg.AssetKey, partition: str | None, multi: bool = False) -> str:
        parts = self._parts(asset_key, partition, multi)
        return storage_lib.join(self.base_dir, *parts[:-1], f"{parts[-1]}.parquet")

    @property
    def evaluation_dir(self) -> str:
        """The folder (or prefix) that holds ``base_dir``: the evaluation's, which the locations this
        IO manager records are relative to (``storage/<asset>/...``), as its pages' are."""
        return storage_lib.parent(self.base_dir)

    def _relative(self, location: str) -> str:
        """``location`` (under ``base_dir``) as recorded: relative to :attr:`evaluation_dir`."""
        return storage_lib.relative(location, self.evaluation_dir)

    def _resolve(self, recorded: str) -> str:
        """A recorded location as a place to read (one recorded before locations were relative: as it is)."""
        return storage_lib.join(self.evaluation_dir, recorded) if storage_lib.is_relative(recorded) else recorded

    def versions_folder(self, asset_key: dg.AssetKey, partition: str | None, multi: bool = False) -> str:
        """Where the kept tables of one asset partition lie, oldest name first."""
        return storage_lib.join(self.base_dir, VERSIONS, *self._parts(asset_key, partition, multi))

    def _keep(self, folder: str, data: bytes, run_id: str) -> str:
        """Write ``data`` as a new version in ``folder`` and remove the versions beyond ``keep_versions``."""
        name = f"{time.time_ns():020d}-{file_name(run_id[:8])}-{hashlib.sha256(data).hexdigest()[:12]}.parquet"
        path = storage_lib.join(folder, name)
        self.storage.write_bytes(path, data)
        if self.keep_versions:
            kept = sorted(o.uri for o in self.storage.list(folder) if "/" not in o.rel and o.rel.endswith(".parquet"))
            for old in kept[:max(0, len(kept) - self.keep_versions)]:
                self.storage.storage().remove(old)
        return path

    @staticmethod
    def _multi(context) -> bool:
        return isinstance(context.asset_partitions_def, dg.MultiPartitionsDefinition)

    def _write(self, context: dg.OutputContext, path: str, df: pl.DataFrame, partition: str | None,
               multi: bool) -> str:
        """Write the table at ``path`` and as a kept version; returns the version's location."""
        buf = io.BytesIO()
        df.write_parquet(buf)
        data = buf.getvalue()
        self.storage.write_bytes(path, data)
        return self._keep(self.versions_folder(context.asset_key, partition, multi), data, context.run_id)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | dict[str, pl.DataFrame]) -> None:
        if obj is None:
            return
        if isinstance(obj, dict):  # a run of many partitions (assets.partitions.each_partition): a file each
            multi = self._multi(context)
            paths = {str(p): self._path(context.asset_key, str(p), multi) for p in obj}
            versions = {str(p): self._write(context, paths[str(p)], df, str(p), multi) for p, df in obj.items()}
            context.add_output_metadata({"paths": dg.MetadataValue.json({p: self._relative(v) for p, v in paths.items()}),
                                         "stored_versions": dg.MetadataValue.json(
                                             {p: self._relative(v) for p, v in versions.items()})})
            return
        partition = context.asset_partition_key if context.has_asset_partitions else None
        multi = partition is not None and self._multi(context)
        path = self._path(context.asset_key, partition, multi)
        version = self._write(context, path, obj, partition, multi)
        context.add_output_metadata({"path": dg.MetadataValue.path(self._relative(path)),
                                     "stored_version": dg.MetadataValue.path(self._relative(version)),
                                     "dagster/row_count": obj.height})

    def _read(self, path: str) -> pl.DataFrame:
        return pl.read_parquet(io.BytesIO(self.storage.read_bytes(path)))

    def _read_recorded(self, where: tuple[str | None, str]) -> pl.DataFrame:
        """The table at a recorded ``(version, path)``: the version (immutable); the path only where
        the record kept none, or its version is gone (removed by hand)."""
        version, path = where
        if version is not None:
            try:
                return self._read(version)
            except FileNotFoundError:
                pass
        return self._read(path)

    def recorded_locations(self, context: dg.InputContext, key: dg.AssetKey,
                           partitions: Sequence[str | None]) -> dict[str | None, tuple[str | None, str]]:
        """Where the table of each partition of ``key`` that this step reads lies, by Dagster's records:
        the materialization the run that produced the input made of it (an upstream step of this run,
        or of the run this one re-executes: a step reads what its upstream step wrote, whatever another
        run stored since), else the latest materialization of that partition. Each is
        ``(kept version, path)`` as the IO manager recorded them; a partition with no record (an
        asset stored outside this instance) is read at its path."""
        instance = context.instance
        wanted = set(partitions)
        found: dict[str | None, dg.AssetMaterialization] = {}
        run_id = _producing_run(context)
        if run_id:
            for record in _run_materializations(instance, run_id, key):
                m = record.asset_materialization
                part = str(m.partition) if m.partition is not None else None
                if part in wanted:
                    found[part] = m  # the run's last materialization of it (a retried step writes again)
        missing = wanted - set(found)
        if missing:
            for part, record in _latest_materializations(instance, key, missing).items():
                found[part] = record.asset_materialization
        out: dict[str | None, tuple[str | None, str]] = {}
        multi = context.has_asset_partitions and self._multi(context)
        for part in partitions:
            fallback = self._path(key, part, multi)
            m = found.get(part)
            if m is None:
                out[part] = (None, fallback)
            else:
                version, path = recorded_version(m.metadata, part), recorded_path(m.metadata, part)
                out[part] = (self._resolve(version) if version else None, self._resolve(path) if path else fallback)
        return out

    def load_input(self, context: dg.InputContext):
        """The input's table as Dagster recorded it (:meth:`recorded_locations`). An input declared
        with ``allow_missing_partitions`` tolerates what was never stored: its missing partitions are
        left out, and an unpartitioned one that is missing loads as None (the site's protocol inputs)."""
        key = context.asset_key
        allow_missing = bool((context.definition_metadata or {}).get("allow_missing_partitions"))
        if not context.has_asset_partitions:
            try:
                return self._read_recorded(self.recorded_locations(context, key, [None])[None])
            except FileNotFoundError:
                if allow_missing:
                    return None
                raise
        partitions = [str(p) for p in context.asset_partition_keys]
        wanted = context.dagster_type.typing_type
        where = self.recorded_locations(context, key, partitions)
        if getattr(wanted, "__origin__", wanted) is not dict and len(partitions) == 1:
            return self._read_recorded(where[partitions[0]])
        out = {}
        for p in partitions:
            try:
                out[p] = self._read_recorded(where[p])
            except FileNotFoundError:
                if not allow_missing:
                    raise
        return out


def _producing_run(context: dg.InputContext) -> str | None:
    """The run whose step produced this input, where Dagster knows it (an upstream step in this run's
    plan); None for an asset loaded from an earlier materialization."""
    upstream = context.upstream_output
    if upstream is None:
        return None
    try:
        return upstream.run_id
    except dg.DagsterInvariantViolationError:
        return None


def _run_materializations(instance: dg.DagsterInstance, run_id: str, key: dg.AssetKey) -> list:
    """The materialization records of ``key`` that run ``run_id`` stored, oldest first."""
    out, cursor = [], None
    while True:
        got = instance.get_records_for_run(run_id, cursor=cursor, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION,
                                           limit=1000)
        out += [r for r in got.records if r.asset_key == key]
        if not got.has_more:
            return out
        cursor = got.cursor


def _latest_materializations(instance: dg.DagsterInstance, key: dg.AssetKey, partitions: set) -> dict:
    """``{partition: record}``: the latest materialization record of each of ``partitions`` of ``key``
    (None: the unpartitioned asset's)."""
    kind = dg.DagsterEventType.ASSET_MATERIALIZATION
    if partitions == {None}:
        records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=1).records
        return {None: records[0]} if records else {}
    ids = instance.event_log_storage.get_latest_storage_id_by_partition(key, kind)
    chosen = [ids[p] for p in partitions if p in ids]
    out = {}
    for i in range(0, len(chosen), 500):
        part = chosen[i:i + 500]
        for r in instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, storage_ids=part),
                                                 limit=len(part)).records:
            assert r.asset_materialization is not None  # a materialization's record
            out[str(r.asset_materialization.partition)] = r
    return out
