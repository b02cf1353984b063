#!/usr/bin/env python3
"""redis-servers for tests that cannot start them: the C tests built for
Windows run under Wine, which can neither fork nor signal a Linux process.
The harness (harness.c, _WIN32) sends one line per connection and reads
"ok N" back (else an error line):

  start PORT TLS_DIR   a redis-server on 127.0.0.1:PORT as the POSIX harness
                       starts it (TLS_DIR "-": plain); N is its pid
  kill PID             SIGKILL, waited for
  stop PID             SIGCONT, SIGTERM, waited for
  pause PID / resume PID   SIGSTOP / SIGCONT

Usage: redis_ctl.py PORT_FILE  (listens on a free loopback port, writes it
to PORT_FILE; on SIGTERM stops every server it started). ask() is the
client's side, for Python tests."""
import os
import signal
import socket
import subprocess
import sys
import threading

servers = {}
lock = threading.Lock()


def start(port, tls_dir):
    args = ["redis-server"]
    if tls_dir != "-":
        args += ["--port", "0", "--tls-port", port,
                 "--tls-cert-file", f"{tls_dir}/server.crt", "--tls-key-file", f"{tls_dir}/server.key",
                 "--tls-ca-cert-file", f"{tls_dir}/ca.crt", "--tls-auth-clients", "no"]
    else:
        args += ["--port", port]
    args += ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
             "--loglevel", "warning"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    with lock:
        servers[p.pid] = p
    return p.pid


def read_line(conn):
    """One line of the protocol (a command or its answer), without its end."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1000)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


def ask(port, *words):
    """A client's side: one command to the redis_ctl.py listening on port;
    its number (a pid, or 0). The Python suites under Wine use it."""
    with socket.create_connection(("127.0.0.1", int(port)), timeout=30) as c:
        c.sendall((" ".join(map(str, words)) + "\n").encode())
        reply = read_line(c)
    status, _, value = reply.partition(" ")
    if status != "ok":
        raise RuntimeError("redis_ctl %s: %s" % (" ".join(map(str, words)), reply))
    return int(value)


def answer(words):
    if words[0] == "start" and len(words) == 3:
        return start(words[1], words[2])
    pid = int(words[1])
    with lock:
        p = servers.get(pid)
    if p is None:
        raise ValueError(f"no server {pid}")
    if words[0] == "pause":
        p.send_signal(signal.SIGSTOP)
    elif words[0] == "resume":
        p.send_signal(signal.SIGCONT)
    elif words[0] in ("kill", "stop"):
        if words[0] == "stop":
            p.send_signal(signal.SIGCONT)
            p.terminate()
        else:
            p.kill()
        p.wait()
        with lock:
            servers.pop(pid, None)
    else:
        raise ValueError(f"unknown command {words[0]}")
    return 0


def serve(conn):
    with conn:
        try:
            reply = f"ok {answer(read_line(conn).split())}\n"
        except Exception as e:  # the test prints it and fails
            reply = f"error {e}\n"
        conn.sendall(reply.encode())


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])

    def stop_all(*_):
        with lock:
            for p in servers.values():
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGINT, stop_all)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
