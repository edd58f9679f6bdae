"""Dagster asset definitions of the VideoArgus graph."""

import warnings

import dagster as dg

# Data versions on outputs are the lineage mechanism this project relies on; Dagster marks the
# parameter beta. Say so once here instead of on every materialization.
warnings.filterwarnings("ignore", category=dg.BetaWarning)

from .candidates import candidate_videos, criterion_evidence, criterion_scores, video_scores
from .inputs import input_instances, rubrics
from .leaderboard import leaderboard, leaderboard_in_range
from .partitions import model_partitions, task_model_partitions, task_partitions

TASK_ASSETS = [input_instances, rubrics]
CANDIDATE_ASSETS = [candidate_videos, criterion_evidence, criterion_scores, video_scores]
ALL_ASSETS = TASK_ASSETS + CANDIDATE_ASSETS + [leaderboard]
ALL_CHECKS = [leaderboard_in_range]

__all__ = ["ALL_ASSETS", "ALL_CHECKS", "TASK_ASSETS", "CANDIDATE_ASSETS", "model_partitions",
           "task_partitions", "task_model_partitions"]
