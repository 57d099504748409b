"""Rendering plan steps into scheduler documents: portable tasks and SkyPilot YAML (pure, no I/O)."""

from npa_workflow.render.names import RenderError, job_name, launch_job_name, wave_identity, wave_key
from npa_workflow.render.skypilot import (
    SECRET_PLACEHOLDER,
    JobDocument,
    launch_document,
    launch_job,
    render_batch,
    render_pipeline,
    render_wave,
    skypilot_task,
    with_secret_values,
)
from npa_workflow.render.task import portable_task

__all__ = [
    "SECRET_PLACEHOLDER",
    "JobDocument",
    "RenderError",
    "job_name",
    "launch_document",
    "launch_job",
    "launch_job_name",
    "portable_task",
    "render_batch",
    "render_pipeline",
    "render_wave",
    "skypilot_task",
    "wave_identity",
    "wave_key",
    "with_secret_values",
]
