"""One controller per resource of the HTTP API."""

from __future__ import annotations

from kz_api.controllers.edits import EditsController
from kz_api.controllers.events import EventsController
from kz_api.controllers.kernels import KernelsController
from kz_api.controllers.runner import RunnerController
from kz_api.controllers.submissions import SubmissionsController
from kz_api.controllers.system import SystemController

__all__ = [
    "EditsController",
    "EventsController",
    "KernelsController",
    "RunnerController",
    "SubmissionsController",
    "SystemController",
]
