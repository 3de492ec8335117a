"""The window of a captured server: the tracer told when the server is ready and when its client has ended.

    with WindowControl() as control:
        env.update(control.env)            # SCENC_TRACE_CONTROL: the tracer connects at its start
        ... the server starts, gets ready ...
        problem = control.mark("open")     # None once the tracer has written the mark
        ... the client runs ...
        problem = control.mark("close")

A Unix socket in a folder of its own; the tracer's control thread (runtime/tracer/tracer_window.h) connects
to it when the launched process starts, and answers each byte once the mark is in the log, so the client
starts only after the window has opened. What the marks do to a conversion: docs/servers.md.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import tempfile
import time
from typing import Optional

_BYTES = {"open": b"o", "close": b"c"}
ANSWER_S = 10.0        # how long the tracer may take to write a mark (it writes a few hundred bytes)


class WindowControl:
    def __init__(self):
        self._folder = tempfile.mkdtemp(prefix="scenc-window-")
        if len(os.path.join(self._folder, "control")) > 100:     # a socket's path holds 107 bytes at most
            os.rmdir(self._folder)
            self._folder = tempfile.mkdtemp(prefix="scenc-window-", dir="/tmp")
        self.path = os.path.join(self._folder, "control")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(8)
        self._peer: Optional[socket.socket] = None
        self.marked: list = []           # the marks written, in order

    @property
    def env(self) -> dict:
        return {"SCENC_TRACE_CONTROL": self.path}

    def _connection(self, wait_s: float) -> Optional[socket.socket]:
        """The tracer's latest connection (an exec'ed image connects again; the newest is the live one)."""
        deadline = time.monotonic() + wait_s
        while True:
            ready, _, _ = select.select([self._listener], [], [], 0 if self._peer else
                                        max(0.0, deadline - time.monotonic()))
            if not ready:
                return self._peer
            conn, _ = self._listener.accept()
            if self._peer is not None:
                self._peer.close()
            self._peer = conn

    def mark(self, which: str) -> Optional[str]:
        """Has the tracer write mark `which` ("open", "close"); None when it did, else why not."""
        peer = self._connection(2.0)
        if peer is None:
            return ("the tracer did not connect to scenc (the server's process does not run the tracer, or it "
                    "started another program without it)")
        try:
            peer.settimeout(ANSWER_S)
            peer.sendall(_BYTES[which])
            answer = peer.recv(1)
        except OSError as exc:
            return f"the tracer did not answer ({exc.strerror or exc})"
        if answer != _BYTES[which]:
            return "the tracer's connection closed before it answered (the server ended?)"
        self.marked.append(which)
        return None

    def close(self) -> None:
        for s in (self._peer, self._listener):
            if s is not None:
                s.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> "WindowControl":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
