"""Admission: what a receiver checks before anything acts on a message. Bytes are
decoded and validated, then must be of the receiver's run, from a member and signed
with the run key; an envelope built in this process (`Posted`, or an own copy: bytes
as one of its endpoints sent them, `bus.own_copies`) was validated when built and is
neither decoded nor verified. Used by every endpoint and by the recorder."""

from __future__ import annotations

from errorflow.bus.own_copies import OWN_COPIES
from errorflow.bus.transport import Delivery, Posted
from errorflow.protocol import signing
from errorflow.protocol.envelope import Envelope, decode


def admission(
    raw: Delivery, run_id: str, members: set[str] | None, key: bytes | None
) -> tuple[Envelope, str | None]:
    """The envelope `raw` holds and why it must be dropped (None: it may be read), checked
    before anything acts on it. A `Posted` envelope was validated when built, in this
    process: it is neither decoded nor verified. Raises `RejectedMessage` for bytes that
    are not an envelope."""
    if isinstance(raw, Posted):
        return raw.env, rejection_reason(raw.env, run_id, members)
    own = OWN_COPIES.get(raw, key)  # as one of this process's endpoints sent it
    if own is not None:
        return own.env, rejection_reason(own.env, run_id, members)
    env = decode(raw)
    reason = rejection_reason(env, run_id, members)
    if reason is None and key is not None:
        reason = signing.verify(key, raw)
    return env, reason


def rejection_reason(env: Envelope, run_id: str, members: set[str] | None) -> str | None:
    if env.run_id != run_id:
        return "wrong_run"
    if members is not None and env.sender not in members:
        return "unknown_sender"
    return None
