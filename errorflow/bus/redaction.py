"""What of an envelope may leave the process: the nets behind every payload's builder.

Everything a sender builds is redacted where it is built (a tool's arguments, an
observation, the task's prompt), but a builder that forgets must not publish or store
a secret: `sealed` is applied to every envelope an endpoint sends, before it is
signed, and `holds_secret` to every envelope the store keeps. Both ask the cheap
question first (`might_hold_secret`) on the part of the text that can hold one (the
whole text of an envelope someone else wrote), so a clean envelope (nearly all of them)
costs one search, not a walk.
"""

from __future__ import annotations

from errorflow.core.redact import might_hold_secret, redact, redact_obj
from errorflow.core.short_memo import ShortMemo
from errorflow.protocol.envelope import Envelope, WireError

#: The longest `message` and `suggestion` a WireError may hold (a redacted text can be
#: longer than the original: it is cut there, or receivers would reject the message).
MAX_ERROR_TEXT = 2000
#: Around an envelope's errors and payload in its JSON: what comes before them is names,
#: ids and numbers, what comes after a number and a signature.
_ERRORS, _TS = ',"errors":', ',"ts":'


#: The longest errors-and-payload text whose answer is kept: a run's envelopes repeat
#: most of theirs (the same event of every trial, the same error), and a kept answer
#: costs a tenth of the search. (A suspect text kept stays in memory until dropped, as
#: `redact`'s memo keeps the error texts it redacts.)
PART_LONGEST = 1024


def _part_suspect(part: str) -> bool:
    """Whether an envelope's errors-and-payload part may hold a secret. Searched alone
    it answers as it does in its envelope: it begins with the `,` of `,"errors":`, which
    no look-behind of the search can match, and the search has no anchors (a test walks
    its patterns for both)."""
    return might_hold_secret(part)


_SUSPECT = ShortMemo(_part_suspect, PART_LONGEST)


def holds_secret(env: Envelope, text: str, ids: bool = False) -> bool:
    """Whether `env`, whose JSON is `text`, may hold something redaction would change
    (`might_hold_secret`). Our own text (`Envelope.encode`: errors, payload and `ts`
    are its last members, in that order) is searched from its errors to its `ts`. With
    `ids` (an envelope someone else built: its members may come in any order) the
    whole text is searched, and its free-form ids."""
    if ids:
        return might_hold_secret(text) or ids_hold_secret(env)
    start, end = text.find(_ERRORS), text.rfind(_TS)  # the first, and the last
    if not 0 <= start < end:
        start, end = 0, len(text)
    if end - start > PART_LONGEST:  # searched in place, not cut out
        return might_hold_secret(text, start, end)
    return _SUSPECT.ask(text[start:end])


def ids_hold_secret(env: Envelope) -> bool:
    """Whether the free-form ids of `env` may hold something redaction would change."""
    return might_hold_secret(" ".join((env.id, env.trace_id, *env.derived_from)))


def sealed(env: Envelope, key: bytes | None) -> tuple[Envelope, bytes, bool]:
    """The envelope as it may leave this process, payload and errors redacted, its wire
    bytes, and whether the net found its text clean (`holds_secret` False: the store
    need not search it again). The net behind everything that builds a payload: one
    that forgets a secret cannot publish it. A clean message (nearly all) costs a
    search of the text of its errors and payload."""
    raw = env.encode(key)
    if not holds_secret(env, raw.decode()):
        return env, raw, True
    clean = _cleaned(env)
    return (env, raw, False) if clean is env else (clean, clean.encode(key), False)


def screened(env: Envelope) -> tuple[Envelope, str, bool]:
    """`sealed` for a receiver in this process: the envelope, its JSON text (unsigned),
    and whether that text is known clean (`holds_secret` of it is False, so the store
    need not search it again: a text still suspect after redaction is not)."""
    text = env.encode().decode()
    if not holds_secret(env, text):
        return env, text, True
    clean = _cleaned(env)
    return (env, text, False) if clean is env else (clean, clean.encode().decode(), False)


def _cleaned(env: Envelope) -> Envelope:
    """`env` with its payload and errors redacted; `env` itself if that changes nothing."""
    payload = redact_obj(env.payload)
    errors = [_redacted_error(e) for e in env.errors]
    if payload == env.payload and errors == env.errors:
        return env
    return env.model_copy(update={"payload": payload, "errors": errors})


def _redacted_error(error: WireError) -> WireError:
    texts = {"tool": error.tool, "message": error.message, "suggestion": error.suggestion}
    update = {k: redact(v)[:MAX_ERROR_TEXT] for k, v in texts.items() if v}
    return error.model_copy(update={**update, "origin": redact(error.origin)})
