"""What the assets and the command line read of Dagster's records: every materialization of an asset
and what moved between two passes (:mod:`.history`: ``argus history``, ``argus diff``, the overview's
"What changed"), the latest record of a partition and the score deltas against it (:mod:`.lineage`), a
pass's recorded fingerprint (:mod:`.fingerprints`), and what the automation conditions read (:mod:`.automation`:
the latest record of each partition, the runs in flight and what they planned, the inputs that moved, the
work left to retry and its back-off, the passes in flight). Read through Dagster's public API; the asset
definitions (``argus_dagster.assets``) and the wiring (``argus_dagster.definitions``) import this, and so
does the command line, directly.
"""

DATA_VERSION_TAG = "dagster/data_version"  # the tag Dagster puts on a materialization: its data version
