package io.ratelimit;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
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
                "--save", "", "--appendonly", "no").redirectErrorStream(true)
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
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 1000);
            s.setSoTimeout(5000);
            OutputStream out = s.getOutputStream();
            ByteArrayOutputStream req = new ByteArrayOutputStream();
            req.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.UTF_8));
            for (String a : args) {
                byte[] b = a.getBytes(StandardCharsets.UTF_8);
                req.write(("$" + b.length + "\r\n").getBytes(StandardCharsets.UTF_8));
                req.write(b);
                req.write("\r\n".getBytes(StandardCharsets.UTF_8));
            }
            out.write(req.toByteArray());
            out.flush();
            return read(new BufferedInputStream(s.getInputStream()));
        }
    }

    private static Object read(InputStream in) throws IOException {
        int type = in.read();
        String line = line(in);
        switch (type) {
            case '+':
                return line;
            case '-':
                throw new IOException("redis error: " + line);
            case ':':
                return Long.parseLong(line);
            case '$': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return null;
                }
                byte[] b = in.readNBytes(n + 2);
                return new String(b, 0, n, StandardCharsets.UTF_8);
            }
            case '*': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return null;
                }
                List<Object> items = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    items.add(read(in));
                }
                return items;
            }
            default:
                throw new IOException("bad RESP type " + type);
        }
    }

    private static String line(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != '\r') {
            if (c < 0) {
                throw new IOException("connection closed");
            }
            b.write(c);
        }
        in.read(); // '\n'
        return b.toString(StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
    }
}
