package bench;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.ratelimit.Limiter;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * The EVALSHA our limiter sends for one decision on one id, as Redis saw it
 * (MONITOR), so that a plain client can send the very same command: the
 * loaded script's SHA, its keys and its arguments (the short form's packed
 * numbers are bytes, hence a byte[] codec).
 */
record ScriptCommand(String sha, byte[][] keys, byte[][] args) {

    /**
     * One decision of {@code limiter} per id, each captured by MONITOR. An
     * ECHO after each decision marks where its commands end, so a script load
     * on first use (EVALSHA, SCRIPT LOAD, EVALSHA) cannot shift ids: the last
     * EVALSHA before the mark is the one that decided.
     */
    static ScriptCommand[] capture(String url, Limiter limiter, String[] ids, RedisCommands<String, String> admin)
            throws IOException {
        URI uri = URI.create(url);
        ScriptCommand[] commands = new ScriptCommand[ids.length];
        try (Socket monitor = new Socket(uri.getHost(), uri.getPort())) {
            OutputStream out = monitor.getOutputStream();
            InputStream in = new BufferedInputStream(monitor.getInputStream());
            out.write("MONITOR\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            readLine(in); // +OK
            for (int i = 0; i < ids.length; i++) {
                limiter.acquire(ids[i]);
                String mark = "rl-bench-mark-" + i;
                admin.echo(mark);
                List<byte[]> last = null;
                for (String line = readLine(in); !line.contains('"' + mark + '"'); line = readLine(in)) {
                    List<byte[]> argv = quoted(line);
                    if (!argv.isEmpty() && new String(argv.get(0), StandardCharsets.US_ASCII).equalsIgnoreCase("evalsha")
                            && !line.contains(" lua]")) {
                        last = argv;
                    }
                }
                if (last == null) {
                    throw new IllegalStateException("no EVALSHA seen for the decision on " + ids[i]);
                }
                int numkeys = Integer.parseInt(new String(last.get(2), StandardCharsets.US_ASCII));
                commands[i] = new ScriptCommand(new String(last.get(1), StandardCharsets.US_ASCII),
                        last.subList(3, 3 + numkeys).toArray(byte[][]::new),
                        last.subList(3 + numkeys, last.size()).toArray(byte[][]::new));
                String key = limiter.key(ids[i]);
                if (!Arrays.equals(commands[i].keys()[0], key.getBytes(StandardCharsets.UTF_8))) {
                    throw new IllegalStateException("captured key is not the limiter's " + key + ": " + commands[i]);
                }
            }
        }
        return commands;
    }

    Object sync(RedisCommands<byte[], byte[]> redis) {
        return redis.evalsha(sha, ScriptOutputType.MULTI, keys, args);
    }

    CompletionStage<Object> async(RedisAsyncCommands<byte[], byte[]> redis) {
        return redis.evalsha(sha, ScriptOutputType.MULTI, keys, args);
    }

    /**
     * Replays the command once and checks its reply is one decision as ours
     * makes them ({allowed, limit, remaining, ...}: admitted, this limit),
     * not a batch's list of replies or an error; returns the reply.
     */
    List<?> check(StatefulRedisConnection<byte[], byte[]> redis, long limit) {
        Object reply = sync(redis.sync());
        if (!(reply instanceof List<?> list) || list.size() < 5 || !Long.valueOf(1).equals(list.get(0))
                || !Long.valueOf(limit).equals(list.get(1))) {
            throw new IllegalStateException("the replayed command does not admit at limit " + limit + ": " + reply);
        }
        return list;
    }

    @Override
    public String toString() {
        StringBuilder s = new StringBuilder("EVALSHA " + sha + " " + keys.length);
        for (byte[][] part : new byte[][][] {keys, args}) {
            for (byte[] a : part) {
                boolean printable = true;
                for (byte b : a) {
                    printable &= b >= 0x21 && b < 0x7f;
                }
                s.append(' ').append(printable ? new String(a, StandardCharsets.US_ASCII)
                        : "<" + HexFormat.of().formatHex(a) + ">");
            }
        }
        return s.toString();
    }

    /** One reply line of MONITOR (no line breaks inside: it escapes them), its bytes as chars. */
    private static String readLine(InputStream in) throws IOException {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        for (int b = in.read(); b != '\n'; b = in.read()) {
            if (b < 0) {
                throw new IOException("MONITOR closed");
            }
            if (b != '\r') {
                line.write(b);
            }
        }
        return line.toString(StandardCharsets.ISO_8859_1);
    }

    /** The quoted arguments after "<time> [db addr] ", unescaped as MONITOR (sdscatrepr) escapes them. */
    private static List<byte[]> quoted(String line) {
        List<byte[]> args = new ArrayList<>();
        ByteArrayOutputStream arg = null;
        for (int i = line.indexOf(']') + 1; i > 0 && i < line.length(); i++) {
            char c = line.charAt(i);
            if (arg == null) {
                if (c == '"') {
                    arg = new ByteArrayOutputStream();
                }
            } else if (c == '"') {
                args.add(arg.toByteArray());
                arg = null;
            } else if (c != '\\') {
                arg.write(c);
            } else {
                c = line.charAt(++i);
                switch (c) {
                    case 'n' -> arg.write('\n');
                    case 'r' -> arg.write('\r');
                    case 't' -> arg.write('\t');
                    case 'a' -> arg.write(7);
                    case 'b' -> arg.write('\b');
                    case 'x' -> {
                        arg.write(Integer.parseInt(line.substring(i + 1, i + 3), 16));
                        i += 2;
                    }
                    default -> arg.write(c); // \\ and \"
                }
            }
        }
        return args;
    }
}
