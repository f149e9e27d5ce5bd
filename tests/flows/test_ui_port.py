"""`assay ui` started again right after Ctrl-C: the port its last server held is waited for while
that server exits, and a connection it left in TIME_WAIT does not hold the port (issue 30, 12).
Real sockets on 127.0.0.1; a port still held after `PORT_RELEASE_S` is refused
(tests/cli/test_feedback.py)."""

from __future__ import annotations

import socket
import threading
import time

from assay.flows.ui import PORT_RELEASE_S, _check_port_free


def listening() -> tuple[socket.socket, int]:
    """A server's listening socket, bound as uvicorn binds (SO_REUSEADDR)."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server, server.getsockname()[1]


def test_a_port_whose_server_is_still_stopping_is_waited_for(capsys):
    server, port = listening()
    threading.Timer(1.0, server.close).start()  # the last `assay ui`'s server, exiting
    started = time.monotonic()
    _check_port_free(port)
    waited = time.monotonic() - started
    assert 0.9 <= waited < PORT_RELEASE_S
    assert capsys.readouterr().out == (
        f"waiting for 127.0.0.1:{port} to be released (a server still stopping?) …\n"
    )


def test_a_connection_the_last_server_left_in_time_wait_does_not_hold_the_port(capsys):
    server, port = listening()
    with socket.create_connection(("127.0.0.1", port)) as client:
        accepted, _ = server.accept()
        accepted.close()  # the server closes first: its side of the connection is in TIME_WAIT
        client.recv(1)
    server.close()
    started = time.monotonic()
    _check_port_free(port)
    assert time.monotonic() - started < 0.5
    assert capsys.readouterr().out == ""
