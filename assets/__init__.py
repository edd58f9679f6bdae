"""Dagster asset definitions of the VideoArgus graph."""

import warnings

import dagster as dg

# Data versions on outputs are the lineage mechanism this project relies on; Dagster marks the
# parameter beta. Say so once here instead of on every materialization.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
# A job of assets with a range policy (the VideoArgus graph) and assets without one (FIRM's) takes one
# partition per run, which is how argus evaluate runs it anyway: Dagster's notice about it is not news.
# Dagster's own conversion of observable source assets reads a property it deprecates.
warnings.filterwarnings("ignore", message="Property `OpDefinition.version` is deprecated")
warnings.filterwarnings("ignore", message="Asset job .* materializes assets with varying BackfillPolicies")

from .alignment import human_alignment, human_alignment_in_range
from .candidates import candidate_videos, criterion_evidence, criterion_scores, video_scores
from .checks import ALL_CHECKS as INVARIANT_CHECKS
from .controls import CONTROL_CHECKS, control_scores, controls
from .costs import costs
from .firm import FIRM_CANDIDATE_ASSETS, FIRM_CHECKS, FIRM_TASK_ASSETS, best_of_n
from .inputs import input_instances, rubrics
from .leaderboard import leaderboard, leaderboard_in_range
from .noise import judge_noise
from .overview import site
from .partitions import model_partitions, task_model_partitions, task_partitions
from .reports import diagnostic_reports
from .robustness import backbone_robustness
from .sources import OBSERVE_JOBS, SOURCES
from .vefx import VEFX_CANDIDATE_ASSETS, VEFX_CHECKS, vefx_leaderboard

TASK_ASSETS = [input_instances, rubrics]
CANDIDATE_ASSETS = [candidate_videos, criterion_evidence, criterion_scores, video_scores, diagnostic_reports]
# FIRM-Video and best-of-N: in the graph, run only when asked (argus evaluate --protocol firm|both).
FIRM_ASSETS = FIRM_TASK_ASSETS + FIRM_CANDIDATE_ASSETS + [best_of_n]
# VEFX-Bench's edit protocol: in the graph, run only when asked (argus evaluate --protocol vefx).
VEFX_ASSETS = VEFX_CANDIDATE_ASSETS + [vefx_leaderboard]
# The judge's own noise: run when asked (argus evaluate --repeat K); the leaderboard reads it.
# Controls (what the evaluator can tell apart): run when asked (argus evaluate --controls N, the demo).
ALL_ASSETS = (TASK_ASSETS + CANDIDATE_ASSETS + [judge_noise, leaderboard, costs, human_alignment, backbone_robustness]
              + [control_scores, controls] + FIRM_ASSETS
              + VEFX_ASSETS + [site])
ALL_CHECKS = [leaderboard_in_range, human_alignment_in_range, *INVARIANT_CHECKS, *CONTROL_CHECKS]
# Kept apart from ALL_CHECKS, whose partitioned checks ride along with every VideoArgus partition run.
GRAPH_CHECKS = ALL_CHECKS + FIRM_CHECKS + VEFX_CHECKS

# The VideoArgus graph that automation keeps up to date (FIRM's assets and the alignment run when asked),
# and the site, which follows whatever it shows.
AUTOMATED_ASSETS = TASK_ASSETS + CANDIDATE_ASSETS + [leaderboard, costs, site]

__all__ = ["ALL_ASSETS", "AUTOMATED_ASSETS", "SOURCES", "OBSERVE_JOBS", "ALL_CHECKS", "TASK_ASSETS", "CANDIDATE_ASSETS", "FIRM_TASK_ASSETS", "FIRM_CANDIDATE_ASSETS",
           "FIRM_CHECKS", "GRAPH_CHECKS", "VEFX_ASSETS", "VEFX_CANDIDATE_ASSETS", "VEFX_CHECKS", "vefx_leaderboard", "site", "costs", "model_partitions",
           "task_partitions", "task_model_partitions", "judge_noise", "control_scores", "controls"]
