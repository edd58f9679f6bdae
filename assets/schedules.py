"""The nightly reconcile: every candidate video observed again, in full.

The candidate-store sensor observes what changed every minute, hashing only files whose change token
moved; the nightly run of the ``observe_candidate_files`` job (:mod:`assets.sources`) hashes every
video again, so a change no token showed (a file rewritten with the same size and time) is seen by the
next morning. What it finds changed, the automation sensor requests (:mod:`assets.automation`).
"""

import dagster as dg

from .sources import OBSERVE_JOBS

nightly_reconcile = dg.ScheduleDefinition(
    name="nightly_reconcile", cron_schedule="0 2 * * *", job=next(j for j in OBSERVE_JOBS if j.name == "observe_candidate_files"),
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Observes every candidate video in full (hashed again); the automation sensor scores what changed.")
