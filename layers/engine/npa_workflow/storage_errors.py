"""What the disk did, said in one line: a full disk, a read-only or unwritable home, a damaged state file.

These are not bugs of ours and get no traceback: the line names the path, what the system said and the fix. A
run stopped by one stays resumable (its state is written whole or not at all: `embedded_aws.durable_aws`, atomic
renames), so the fix of a full disk is to free space and `--resume`.
"""

from __future__ import annotations

import errno

_FULL = (errno.ENOSPC, errno.EDQUOT)
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def storage_problem(exc: BaseException, resume_hint: str = "", home: object = None) -> str | None:
    """The one line for a storage fault, or None when `exc` is something else (`home`: the path named when the
    error names none)."""
    resume = f", then {resume_hint}" if resume_hint else ""
    if isinstance(exc, OSError) and exc.errno in (*_FULL, *_READ_ONLY, errno.EIO):
        where = exc.filename or home or "the home"
        said = exc.strerror or str(exc)
        if exc.errno in _FULL:
            return f"{where}: {said} (fix: free space on the disk that holds it{resume})"
        if exc.errno == errno.EIO:
            return f"{where}: {said} (fix: check the disk; `dmesg` names the device{resume})"
        return f"{where}: {said} (fix: make it writable, or set NPA_WORKFLOW_HOME to a writable folder{resume})"
    import sqlite3  # here: the runtime's event pump imports this module, most runs never need sqlite's errors

    if isinstance(exc, sqlite3.DatabaseError):
        text = str(exc)
        if "full" in text:
            return f"{home or 'the local state database'}: {text} (fix: free space on the disk that holds it{resume})"
        if "readonly" in text or "unable to open" in text:
            return (f"the local state database: {text} (fix: make the home writable, or set NPA_WORKFLOW_HOME to a "
                    "writable folder)")
        if "malformed" in text or "not a database" in text:
            return (f"the local state database: {text} (fix: restore the home's state from a backup, or start the "
                    "run anew with another --run-id)")
    return None


_FAULT_TEXTS = ("No space left on device", "Disk quota exceeded", "Read-only file system", "database or disk is full",
                "attempt to write a readonly database")


def is_storage_fault(error: BaseException | str | None) -> bool:
    """Whether an error (or an error's message, as a Lambda reports it) is the disk's: the runtime then says it
    once, at the end, instead of at every retry on the way."""
    if isinstance(error, BaseException):
        return storage_problem_in(error) is not None
    return any(text in str(error or "") for text in _FAULT_TEXTS)


def storage_problem_in(exc: BaseException, resume_hint: str = "", home: object = None) -> str | None:
    """`storage_problem` of `exc` or of what caused it (a write deep in a library, re-raised as its own error)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        problem = storage_problem(current, resume_hint, home)
        if problem is not None:
            return problem
        current = current.__cause__ or current.__context__
    return None
