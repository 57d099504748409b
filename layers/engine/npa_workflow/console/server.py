"""The console's HTTP server: uvicorn on 127.0.0.1, in the foreground (`npa-workflow console`) or in a thread
(`serve`'s own console). The socket is bound here first, so a port of 0 becomes a free one known before the server
starts, and a port in use is one clear error instead of a traceback."""

from __future__ import annotations

import socket
import threading
from typing import Any

HOST = "127.0.0.1"


class ConsoleBindError(RuntimeError):
    pass


def bind(port: int | None, host: str = HOST) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port or 0))
    except OSError as exc:
        sock.close()
        raise ConsoleBindError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (fix: --console-port / "
                               "--port with a free port, or 0 for any)") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


class ConsoleServer:
    def __init__(self, console: Any, port: int | None = None, host: str = HOST) -> None:
        import uvicorn

        self.console = console
        self.sock = bind(port, host)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://{host}:{self.port}/"
        config = uvicorn.Config(console.app(), log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1, ws="none")
        self.server = uvicorn.Server(config)
        console.server_exiting = lambda: self.server.should_exit  # Ctrl-C: the event streams end, not hang
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """In the foreground until Ctrl-C / SIGTERM (uvicorn's own handling)."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.console.closing.set()
            self.sock.close()

    def start(self) -> ConsoleServer:
        """In a daemon thread (uvicorn installs no signal handlers off the main thread)."""
        self._thread = threading.Thread(target=self.serve_forever, name="npa-console", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.console.closing.set()  # open event streams end within a second, so the shutdown is graceful
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
