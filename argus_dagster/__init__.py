"""argus-dagster: VideoArgus (rubric-grounded, evidence-based evaluation of generated and edited
videos) as a Dagster project.

This package is the domain library; it never imports the Dagster asset or resource packages except in
:mod:`argus_dagster.definitions`, which wires them into one ``Definitions`` object. Those live in the
repository's top-level ``assets/`` and ``resources/`` folders and import as ``argus_dagster.assets`` and
``argus_dagster.resources`` (links in this folder; the wheel holds them here), names no user's folder can
hide.
"""

__version__ = "0.1.0"
