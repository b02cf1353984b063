package io.ratelimit;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A throwaway redis-server on a free loopback port, plus a tiny RESP client
 * so tests can look at Redis without going through the code under test.
 */
/** A throwaway redis-server on a free loopback port; the Spring module's tests use it too (test-jar). */
public final class RedisServer implements AutoCloseable {
    final int port;
    private final Process process;

    private RedisServer(int port, Process process) {
        this.port = port;
        this.process = process;
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
        Process p = new ProcessBuilder("redis-server", "--port", String.valueOf(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--enable-debug-command", "local").redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        RedisServer server = new RedisServer(port, p);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                if ("PONG".equals(server.command("PING"))) {
                    return server;
                }
            } catch (IOException e) {
                if (!p.isAlive() || System.nanoTime() > deadline) {
                    p.destroyForcibly();
                    throw new IllegalStateException("redis-server did not start on port " + port, e);
                }
                Thread.sleep(20);
            }
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
        process.destroy();
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
    }
}
