"""The one error type a user can cause; the CLI turns it into a single line and exit code 2. Each error carries a
code saying which kind of mistake it is, so that a caller (check's rules) can sort errors without reading their
text."""

# The kinds of mistake. A check rule claims the codes it reports (kvplan/check/rules.py).
INVALID_VALUE = "invalid-value"  # a value of the wrong type or range, or one the engine refuses
PARALLEL_SPLIT = "parallel-split"  # a tensor- or pipeline-parallel size the model does not divide into


class KvplanError(Exception):
    """A mistake in the user's input: a message saying what, where, and what to do."""

    def __init__(self, message: str, where: str | None = None, code: str = INVALID_VALUE) -> None:
        self.where = where
        self.message = message
        self.code = code
        super().__init__(f"{where}: {message}" if where else message)

    def at(self, where: str) -> "KvplanError":
        """The same mistake, located where the caller knows it came from (the knob as the user spelled it)."""
        return KvplanError(self.message, where, self.code)


class LocatedError(KvplanError):
    """A mistake at a known line of a file (a YAML key given twice, say)."""

    def __init__(self, message: str, where: str | None, line: int | None) -> None:
        super().__init__(message, where)
        self.line = line
