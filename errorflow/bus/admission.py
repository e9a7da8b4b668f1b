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
    raw: Delivery,
    run_id: str,
    members: set[str] | None,
    key: bytes | None,
    *,
    take: bool = False,
) -> tuple[Envelope, str | None, bool]:
    """The envelope `raw` holds, why it must be dropped (None: it may be read), and
    whether its sender's redaction net found its text clean, checked before anything
    acts on it. A `Posted` envelope or an own copy was validated when built, in this
    process: it is neither decoded nor verified. `take`: the own copy goes (the
    recorder, which files each message once). Raises `RejectedMessage` for bytes that
    are not an envelope."""
    if isinstance(raw, Posted):
        return raw.env, rejection_reason(raw.env, run_id, members), raw.clean
    own = (OWN_COPIES.take if take else OWN_COPIES.get)(raw, key)
    if own is not None:  # as one of this process's endpoints sent it
        return own.env, rejection_reason(own.env, run_id, members), own.clean
    env = decode(raw)
    reason = rejection_reason(env, run_id, members)
    if reason is None and key is not None:
        reason = signing.verify(key, raw)
    return env, reason, False


def rejection_reason(env: Envelope, run_id: str, members: set[str] | None) -> str | None:
    if env.run_id != run_id:
        return "wrong_run"
    if members is not None and env.sender not in members:
        return "unknown_sender"
    return None
