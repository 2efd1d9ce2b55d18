"""Stop and Clear end the chat's reply in progress from inside its own stream.

Gradio's `cancels` kills a streaming event's task and then sends the browser a completion without
data. Gradio 6's page reads that message as data for the reply's outputs, fails on it, and, when the
message arrives before the page has finished cancelling, marks every output of the reply "Error"
(seen in CI: Clear pressed mid-reply left "Error" under the empty chat). So the buttons cancel
nothing. They mark the session's reply, and the reply ends itself at its next update with a last
update of its own: the stopped reply as it was shown, or the cleared chat. The stream's last word is
then always consistent with the button, even when an update was already on its way when the button's
own answer reached the page.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Reply:
    """A reply being streamed; `ended_by` is set by the visitor's button ("stop" or "clear")."""

    ended_by: str | None = None


class Replies:
    """The reply each session is streaming (at most one: a new message waits for the last reply)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streaming: dict[str, Reply] = {}

    @contextmanager
    def streaming(self, session: str | None) -> Iterator[Reply]:
        """The session's reply while the block runs. Without a session (a direct call), the reply
        cannot be reached by a button and streams to its end."""
        reply = Reply()
        if session is None:
            yield reply
            return
        with self._lock:
            self._streaming[session] = reply
        try:
            yield reply
        finally:
            with self._lock:
                if self._streaming.get(session) is reply:
                    del self._streaming[session]

    def is_latest(self, session: str | None, reply: Reply) -> bool:
        """Whether `reply` is still the session's newest: a reply stopped while it finishes its update
        may already have a successor (Retry pressed right after Stop), whose views it must not overwrite."""
        with self._lock:
            return session is None or self._streaming.get(session) is reply

    def end(self, session: str | None, by: str) -> bool:
        """Ask the session's reply in progress to end; False when none is streaming."""
        with self._lock:
            reply = self._streaming.get(session) if session is not None else None
            if reply is not None:
                reply.ended_by = by
        return reply is not None

    def __contains__(self, session: str) -> bool:
        """Whether `session` has a reply streaming."""
        return session in self._streaming
