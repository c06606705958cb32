"""The one error type a user can cause; the CLI turns it into a single line and exit code 2."""


class KvplanError(Exception):
    """A mistake in the user's input: a message saying what, where, and what to do."""

    def __init__(self, message: str, where: str | None = None) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)

    def at(self, where: str) -> "KvplanError":
        """The same mistake, located where the caller knows it came from (the knob as the user spelled it)."""
        return KvplanError(self.message, where)


class LocatedError(KvplanError):
    """A mistake at a known line of a file (a YAML key given twice, say)."""

    def __init__(self, message: str, where: str | None, line: int | None) -> None:
        super().__init__(message, where)
        self.line = line
