"""The one error shape of the API: {"error": one line, "field": the field as the user sent it}."""

from __future__ import annotations


class ApiError(Exception):
    """A mistake in a request, or a request the server will not run (too large, too long)."""

    def __init__(self, message: str, field: str | None, status: int = 400) -> None:
        super().__init__(message)
        self.message = " ".join(message.split())
        self.field = field
        self.status = status

    def body(self) -> dict[str, str | None]:
        return {"error": self.message, "field": self.field}
