"""Secrets in connector properties (passwords, keys, hash salts) and their masking for printing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headwater.config.patterns import hide_salt

SECRET_WORDS = ("password", "secret", "sslpassword", "token")
MASK = "********"


def is_secret(name: str) -> bool:
    """True for a property whose value is a secret (its last name part holds password, secret, token)."""
    last = name.rsplit(".", 1)[-1].lower()
    return any(w in last for w in SECRET_WORDS)


def mask_secrets(props: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `props` with every secret value, and every hash salt in a name, replaced by asterisks."""
    return {hide_salt(k): (MASK if is_secret(k) and v not in (None, "") else v) for k, v in props.items()}
