package io.ratelimit;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One connection to a test's Redis, outside the code under test: binary-safe
 * (DUMP / RESTORE) or, with text, bulk strings as Strings.
 */
final class Resp implements AutoCloseable {
    private final Socket socket = new Socket();
    private final OutputStream out;
    private final InputStream in;
    private final boolean text;

    Resp(int port) throws IOException {
        this(port, false);
    }

    Resp(int port, boolean text) throws IOException {
        this.text = text;
        socket.connect(new InetSocketAddress("127.0.0.1", port), 2000);
        socket.setSoTimeout(10000);
        out = socket.getOutputStream();
        in = new BufferedInputStream(socket.getInputStream());
    }

    /** One command (String or byte[] arguments); a Long, byte[], List or null; a Redis error throws. */
    Object call(Object... args) throws IOException {
        ByteArrayOutputStream req = new ByteArrayOutputStream();
        req.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
        for (Object a : args) {
            byte[] b = a instanceof byte[] ? (byte[]) a : a.toString().getBytes(StandardCharsets.UTF_8);
            req.write(("$" + b.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            req.write(b);
            req.write("\r\n".getBytes(StandardCharsets.US_ASCII));
        }
        out.write(req.toByteArray());
        out.flush();
        return read();
    }

    private Object read() throws IOException {
        int type = in.read();
        String line = line();
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
                return text ? new String(b, 0, n, StandardCharsets.UTF_8) : Arrays.copyOf(b, n);
            }
            case '*': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return null;
                }
                List<Object> items = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    items.add(read());
                }
                return items;
            }
            default:
                throw new IOException("bad RESP type " + type);
        }
    }

    private String line() throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (int c; (c = in.read()) != '\r';) {
            if (c < 0) {
                throw new IOException("connection closed");
            }
            b.write(c);
        }
        in.read(); // '\n'
        return b.toString(StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
