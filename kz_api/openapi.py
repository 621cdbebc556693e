"""OpenAPI helpers: the documented error answers of a route, and writing the generated
document to `schemas/openapi.yaml` (`python -m kz_api.openapi [PATH]`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from litestar import Litestar
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, Operation, RequestBody, Schema
from litestar.openapi.spec.enums import OpenAPIFormat, OpenAPIType

from kz_api.errors import ErrorEnvelope

__all__ = ["errors", "multipart_operation", "openapi_yaml", "write_openapi"]

_DESCRIPTIONS = {
    400: "Invalid input",
    401: "Not authenticated",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Too large",
    415: "Unsupported media type",
    429: "Quota exceeded",
    500: "Internal error",
    503: "Event log unavailable",
}


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """Error envelope answers for `statuses` plus the ones every route may give (413: a body
    over the route's limit, kz_api.body_limit)."""
    wanted = sorted({*statuses, 400, 413, 500, 503})
    return {
        code: ResponseSpec(
            data_container=ErrorEnvelope,
            description=_DESCRIPTIONS.get(code, "Error"),
            generate_examples=False,
        )
        for code in wanted
    }


def _form_schema(file_field: str, required: list[str], fields: dict[str, str]) -> Schema:
    props: dict[str, Any] = {
        name: Schema(type=OpenAPIType.STRING, description=text) for name, text in fields.items()
    }
    props[file_field] = Schema(
        type=OpenAPIType.STRING,
        format=OpenAPIFormat.BINARY,
        description="gzip tarball of the package",
    )
    return Schema(type=OpenAPIType.OBJECT, properties=props, required=[*required, file_field])


def multipart_operation(required: list[str], fields: dict[str, str]) -> type[Operation]:
    """An Operation class documenting a multipart form that the handler streams itself."""
    schema = _form_schema("package", required, fields)

    @dataclass
    class MultipartOperation(Operation):  # a dataclass again: only then is __post_init__ run
        def __post_init__(self) -> None:
            self.request_body = RequestBody(
                content={"multipart/form-data": OpenAPIMediaType(schema=schema)}, required=True
            )

    return MultipartOperation


def openapi_yaml(app: Litestar) -> str:
    """The app's OpenAPI document as YAML, keys in a stable order."""
    document = app.openapi_schema.to_schema()
    return yaml.safe_dump(document, sort_keys=True, allow_unicode=True, width=100)


def write_openapi(app: Litestar, path: Path) -> None:
    path.write_text(openapi_yaml(app))


if __name__ == "__main__":  # pragma: no cover - a tool entry point
    from kz_api.app import create_app
    from kz_events.config import Settings

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("schemas/openapi.yaml")
    write_openapi(create_app(Settings()), target)
