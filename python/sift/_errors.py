"""The exceptions sift raises, with the positions the Rust errors carry."""

from __future__ import annotations


class FilterError(ValueError):
    """A filter expression was refused (syntax error, or meaningless for the link type).

    Attributes:
        message: what is wrong, e.g. ``"syntax error: unexpected end of expression"``.
        expression: the expression that was compiled.
        start, end: the offending part as ``expression[start:end]`` (indices into the Python
            string), or ``None`` when the error is about the filter as a whole.
        rendered: the message followed by the expression with a caret line under the
            offending part, as the ``sift`` command prints it.
        kind: ``"syntax"`` (not in the language), ``"semantic"`` (in the language but
            meaningless for this link type, e.g. ``"tcp port 99999"``), ``"codegen"`` (too large
            for the bytecode) or ``"internal"`` (a bug in sift).

    ``str(error)`` is the message followed by the caret rendering.
    """

    def __init__(
        self,
        message: str,
        expression: str,
        start: int | None = None,
        end: int | None = None,
        rendered: str | None = None,
        kind: str = "syntax",
    ) -> None:
        super().__init__(message, expression, start, end, rendered, kind)
        self.message = message
        self.expression = expression
        self.start = start
        self.end = end
        self.rendered = rendered if rendered is not None else message
        self.kind = kind

    def __str__(self) -> str:
        # The rendering starts with its own "error: <message>" line; keep only the picture.
        picture = self.rendered.partition("\n")[2]
        return f"{self.message}\n{picture}" if picture else self.message


class CaptureError(ValueError):
    """A capture file is not a valid pcap or pcapng file.

    Every record before the problem has been delivered when this is raised.

    Attributes:
        message: what is wrong.
        path: the file.
        offset: the byte offset in the file where the offending structure (file header, record
            header, block, option) starts.
        truncated: ``True`` when the file simply ends too early (a capture that was cut off),
            ``False`` for corrupt contents.
    """

    def __init__(self, message: str, path: str, offset: int, truncated: bool = False) -> None:
        super().__init__(message, path, offset, truncated)
        self.message = message
        self.path = path
        self.offset = offset
        self.truncated = truncated

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"
