package io.ratelimit;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A throwaway redis-server on a free loopback port, plus a tiny RESP client
 * so tests can look at Redis without going through the code under test.
 */
/** A throwaway redis-server on a free loopback port; the Spring module's tests use it too (test-jar). */
public final class RedisServer implements AutoCloseable {
    /**
     * Under Wine a Windows JVM can neither start nor signal a Linux
     * redis-server (its ProcessBuilder gets no handle): core/tests/redis_ctl.py
     * does it on request at 127.0.0.1:$RL_TEST_REDIS_CTL, as for the C tests
     * (scripts/windows-test.sh jar sets it).
     */
    private static final String CTL = System.getenv("RL_TEST_REDIS_CTL");

    final int port;
    private final Process process;
    /** The server's pid at redis_ctl (CTL set; process null). */
    private final long ctlPid;
    /** Closed once already: closing again does nothing, as destroy() on an ended process. */
    private boolean ctlStopped;

    private RedisServer(int port, Process process, long ctlPid) {
        this.port = port;
        this.process = process;
        this.ctlPid = ctlPid;
    }

    public static RedisServer start() throws Exception {
        return start(freePort());
    }

    /** A loopback port nothing listens on (right now). */
    public static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /** A server on this port (e.g. one a client was already pointed at while it was dead). */
    public static RedisServer start(int port) throws Exception {
        RedisServer server = CTL != null ? new RedisServer(port, null, ctl("start " + port + " -"))
                : new RedisServer(port, new ProcessBuilder("redis-server", "--port", String.valueOf(port), "--bind",
                        "127.0.0.1", "--save", "", "--appendonly", "no", "--enable-debug-command", "local")
                        .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start(), 0);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                if ("PONG".equals(server.command("PING"))) {
                    return server;
                }
            } catch (IOException e) {
                boolean exited = server.process != null && !server.process.isAlive();
                if (exited || System.nanoTime() > deadline) {
                    if (server.process != null) {
                        server.process.destroyForcibly();
                    } else {
                        ctl("kill " + server.ctlPid);
                    }
                    throw new IllegalStateException("redis-server did not start on port " + port, e);
                }
                Thread.sleep(20);
            }
        }
    }

    /** One line to redis_ctl, whose answer is "ok N": returns N. */
    private static long ctl(String line) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), Integer.parseInt(CTL)), 5000);
            s.setSoTimeout(30000);
            s.getOutputStream().write((line + "\n").getBytes(StandardCharsets.US_ASCII));
            InputStream in = s.getInputStream();
            String answer = new String(in.readAllBytes(), StandardCharsets.US_ASCII).strip();
            if (!answer.startsWith("ok ")) {
                throw new IOException("redis_ctl at port " + CTL + ": " + line + " -> " + answer);
            }
            return Long.parseLong(answer.substring(3));
        }
    }

    public String url() {
        return "redis://127.0.0.1:" + port;
    }

    public long dbsize() throws IOException {
        return (Long) command("DBSIZE");
    }

    public void flushAll() throws IOException {
        command("FLUSHALL");
    }

    @SuppressWarnings("unchecked")
    public List<String> keys() throws IOException {
        List<String> out = new ArrayList<>();
        for (Object o : (List<Object>) command("KEYS", "*")) {
            out.add((String) o);
        }
        return out;
    }

    /** Sends one command; returns String, Long, List or null; a Redis error throws. */
    Object command(String... args) throws IOException {
        try (Resp resp = new Resp(port, true)) {
            return resp.call((Object[]) args);
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (process == null) {
            if (ctlStopped) {
                return;
            }
            ctlStopped = true;
            try {
                ctl("stop " + ctlPid); // SIGTERM, waited for, as destroy() below
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
            return;
        }
        process.destroy();
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
    }
}
