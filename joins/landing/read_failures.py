"""Whether a read that failed says something about a landing file, or about what serves it.

A file whose bytes are no valid Parquet, gzip or bz2 (or that was removed after it landed) is
refused with the reason and quarantined whole: reading it again gives the same answer. A read
that failed because the store or this machine did (a network error or a timeout of an object
store, a denied permission, an I/O error of the disk, this process out of memory) says nothing
about the file: refused, good data would go to quarantine that the next read would have
stored. Such a failure is raised instead (`LandingReadError`, or the MemoryError itself): the
ingest stops before it commits anything, and the next ingest reads the file again (a planned
batch is re-run with its own files). A failure that lasts (a permission never granted) stops
the source's ingests until it is fixed, with this error naming the file; removing the file
instead lets them go on (it is then recorded as removed after it landed).

Telling the two apart by the error's class alone is not possible: pyarrow raises a plain
OSError both for a Parquet footer that does not deserialize and for an object store that does
not answer, and bz2 one for a damaged stream. So an error counts as the store's when its class
says so (a connection error, a timeout, a denied permission), when it carries such an errno
(EIO, ECONNRESET, ...), or when its text is one the store clients write (S3's `AWS Error`, a
JVM's `java.net.SocketTimeoutException`, ...). Anything else is the file's.
"""

from __future__ import annotations

import errno

from joins.errors import JoinsError

# Errnos of a store or a machine failing, not of a file's bytes. ENOENT is not one: a file
# removed after it landed is refused with that reason (joins.landing.files.file_problem).
_STORE_ERRNOS = frozenset({
    errno.EIO, errno.EAGAIN, errno.EINTR, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.ENOSPC,
    errno.EACCES, errno.EPERM, errno.ESTALE, errno.ETIMEDOUT, errno.ECONNRESET,
    errno.ECONNREFUSED, errno.ECONNABORTED, errno.ENETDOWN, errno.ENETUNREACH, errno.ENETRESET,
    errno.EHOSTDOWN, errno.EHOSTUNREACH, errno.EPIPE, errno.ENOTCONN,
})
_STORE_CLASSES: tuple[type[BaseException], ...] = (
    ConnectionError, TimeoutError, PermissionError, InterruptedError, BlockingIOError)
# What the stores' clients write (pyarrow's S3, GCS, Azure and HDFS file systems; the JVM's
# network and Hadoop object-store errors), matched in the error's message and root cause only
# (read_error_text): a JVM stack's frames name java.net classes in any error.
_STORE_TEXTS = (
    "AWS Error", "curlCode", "google::cloud", "Azure Error", "HDFS connect",
    "java.net.SocketTimeoutException", "java.net.SocketException", "java.net.ConnectException",
    "java.net.UnknownHostException", "java.nio.file.AccessDeniedException",
    "AWSClientIOException", "SdkClientException", "Connection reset", "Connection refused",
    "Read timed out", "Broken pipe", "Input/output error", "Permission denied",
)


def read_error_text(exc: BaseException) -> str:
    """A one-line account of why a read failed: a JVM error's own message (the line after
    py4j's "An error occurred while calling ...") and its root cause."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    head = next((ln[1:].strip() for ln in lines if ln.startswith(":")), lines[0] if lines else "")
    causes = [ln[len("Caused by:"):].strip() for ln in lines if ln.startswith("Caused by:")]
    text = head if not causes else f"{head} (cause: {causes[-1]})"
    return (text or type(exc).__name__)[:400]


class LandingReadError(JoinsError):
    """Reading a landing file failed for a reason that is not the file's content; nothing of
    the ingest was committed."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"{path}: reading the file failed ({reason}). That is the store or "
            f"this machine failing, not the file's content, so the file was not quarantined and "
            f"nothing of this ingest was committed; the next ingest reads it again")


def store_failed(exc: BaseException) -> bool:
    """Whether `exc`, raised reading a file, is a failure of what serves the file."""
    if isinstance(exc, (MemoryError, *_STORE_CLASSES)):
        return True
    if isinstance(exc, OSError) and exc.errno in _STORE_ERRNOS:
        return True
    text = read_error_text(exc)
    return any(t in text for t in _STORE_TEXTS)


def raise_if_store_failed(exc: BaseException, path: str) -> None:
    """Raise when `exc` says nothing about the file at `path` (`store_failed`); return when it
    is the file's, for the caller to refuse the file with its reason. A MemoryError is raised
    as it is: this process's, whatever it read."""
    if isinstance(exc, MemoryError):
        raise exc
    if store_failed(exc):
        raise LandingReadError(path, read_error_text(exc)) from exc


def damaged_stream(exc: BaseException) -> str:
    """Why a file read as a stream (text, gzip, bz2) is refused, from an error `store_failed`
    says is the file's: its strerror (a gzip or bz2 error's), else its message."""
    return f"cannot be read: {getattr(exc, 'strerror', None) or str(exc) or type(exc).__name__}"
