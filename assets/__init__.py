"""Dagster asset definitions of the VideoArgus graph."""

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
