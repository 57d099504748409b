"""S3 bucket names a spec writes: AWS's naming rules for general purpose buckets, checked before a run
creates or reads one (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).

Validation checks the bucket a run creates and writes under, `config.bucket` (and any `*_bucket` key:
a name, or an `s3://` URI), where it holds no `run.*` token (the run id is only known at run time); a
run checks every bucket it creates with the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from npa_workflow.errors import Problem
from npa_workflow.spec.paths import join

_CHARS = re.compile(r"[a-z0-9.\-]+")
_IP = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_URI_BUCKET = re.compile(r"s3://([^/\s]*)")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
FIX = "use 3-63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit"


def bucket_name_problem(name: str) -> str | None:
    """Why `name` is not a legal S3 bucket name, or None when it is."""
    if not 3 <= len(name) <= 63:
        return f"is {len(name)} characters long (a bucket name has 3 to 63)"
    if not _CHARS.fullmatch(name):
        bad = sorted({ch for ch in name if not _CHARS.fullmatch(ch)})
        return "holds " + ", ".join(repr(ch) for ch in bad) + " (only lower-case letters, digits, '.' and '-')"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must start and end with a letter or digit"
    if ".." in name:
        return "has two adjacent periods"
    if _IP.fullmatch(name):
        return "is formatted as an IP address"
    for prefix in _RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"starts with {prefix!r}, which S3 reserves"
    for suffix in _RESERVED_SUFFIXES:
        if name.endswith(suffix):
            return f"ends with {suffix!r}, which S3 reserves"
    return None


def uri_buckets(text: str) -> list[str]:
    """The bucket part of every `s3://` URI in `text`."""
    return _URI_BUCKET.findall(text)


def check_bucket_names(raw_config: Mapping[str, Any], resolved_config: Mapping[str, Any]) -> list[Problem]:
    """Problems of the config's bucket names validation can know (see the module doc)."""
    problems: list[Problem] = []
    for key, raw in raw_config.items():
        value = resolved_config.get(key)
        if not isinstance(raw, str) or not isinstance(value, str) or "{{run." in raw.replace(" ", ""):
            continue
        if not (key == "bucket" or key.endswith("_bucket")) or not value.strip():
            continue
        names = uri_buckets(value) if value.strip().startswith("s3://") else [value.strip()]
        for name in dict.fromkeys(names):
            reason = bucket_name_problem(name)
            if reason:
                problems.append(Problem(join("config", key), f"bucket {name!r} is not a legal S3 bucket name: it "
                                        f"{reason}", FIX))
    return problems
