"""argus-dagster: VideoArgus (rubric-grounded, evidence-based evaluation of generated and edited
videos) as a Dagster project.

This package is the domain library; it never imports the Dagster asset or resource packages except in
:mod:`argus_dagster.definitions`, which wires them into one ``Definitions`` object.
"""

__version__ = "0.1.0"
