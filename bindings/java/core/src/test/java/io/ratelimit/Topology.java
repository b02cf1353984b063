package io.ratelimit;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * The shared Redis test topologies (TLS, Sentinel, Cluster) of
 * {@code tests/topology/topology.py}. Each one comes from the RL_TEST_*
 * environment variables when they describe it (CI starts everything once for
 * all suites); otherwise it is started on first use, once per test JVM, with
 * {@code topology.py up DIR --only NAME}, and stopped ({@code down DIR}) when
 * the JUnit run ends. A topology that cannot be started fails the tests that
 * need it: they are never skipped for want of servers.
 *
 * <p>Use: {@code @ExtendWith(Topology.Extension.class)} and a {@code Topology}
 * parameter on a {@code @BeforeAll} or test method, then {@link #require}.
 */
public final class Topology {
    public static final String TLS = "tls";
    public static final String SENTINEL = "sentinel";
    public static final String CLUSTER = "cluster";

    private static final Topology INSTANCE = new Topology();
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(Topology.class);

    /** The RL_TEST_* variables known so far: the environment's, plus what this JVM started. */
    private final Map<String, String> env = new HashMap<>(System.getenv());
    /** Directories this JVM started topologies in (to stop them). */
    private final List<Path> started = new ArrayList<>();
    /** Topologies that failed to start, with the reason (not retried: each try costs up to a minute). */
    private final Map<String, RuntimeException> failed = new HashMap<>();
    private boolean hookInstalled;

    private Topology() {}

    /** Resolves {@code Topology} parameters and stops what was started once all tests have run. */
    public static final class Extension implements ParameterResolver {
        @Override
        public boolean supportsParameter(ParameterContext p, ExtensionContext ctx) {
            return p.getParameter().getType() == Topology.class;
        }

        @Override
        public Object resolveParameter(ParameterContext p, ExtensionContext ctx) {
            // the root store closes its resources when the whole run ends
            ctx.getRoot().getStore(NS).getOrComputeIfAbsent("stopper", k -> new Stopper(), Stopper.class);
            return INSTANCE;
        }
    }

    private static final class Stopper implements ExtensionContext.Store.CloseableResource {
        @Override
        public void close() {
            INSTANCE.stopAll();
        }
    }

    /** Makes sure the named topologies run (starting the missing ones together); throws when they cannot. */
    public synchronized Topology require(String... names) {
        Set<String> missing = new LinkedHashSet<>();
        for (String name : names) {
            RuntimeException e = failed.get(name);
            if (e != null) {
                throw new IllegalStateException("the " + name + " topology did not start (see the first failure)", e);
            }
            if (!described(name)) {
                missing.add(name);
            }
        }
        if (!missing.isEmpty()) {
            try {
                start(missing);
            } catch (RuntimeException e) {
                for (String name : missing) {
                    failed.put(name, e);
                }
                throw e;
            }
        }
        return this;
    }

    private boolean described(String name) {
        switch (name) {
            case TLS:
                if (env.get("RL_TEST_TLS_URL") == null) {
                    return false;
                }
                for (String v : List.of("RL_TEST_TLS_DIR", "RL_TEST_TLS_CLIENTAUTH_PORT", "RL_TEST_TLS_BADHOST_PORT")) {
                    if (env.get(v) == null) {
                        throw new IllegalStateException("RL_TEST_TLS_URL is set but " + v + " is not");
                    }
                }
                return true;
            case SENTINEL:
                return env.get("RL_TEST_SENTINEL_URL") != null;
            case CLUSTER:
                return env.get("RL_TEST_CLUSTER_URL") != null;
            default:
                throw new IllegalArgumentException("unknown topology " + name);
        }
    }

    private void start(Set<String> names) {
        Path script = repoRoot().resolve("tests/topology/topology.py");
        Path dir;
        try {
            Path base = Paths.get(System.getProperty("ratelimit.topology.dir", "target")).toAbsolutePath();
            Files.createDirectories(base);
            dir = Files.createTempDirectory(base, "topology-");
        } catch (IOException e) {
            throw new IllegalStateException("cannot create a topology directory", e);
        }
        if (!hookInstalled) {
            // a JVM that ends without the JUnit run finishing still stops its servers
            Runtime.getRuntime().addShutdownHook(new Thread(this::stopAll, "topology-down"));
            hookInstalled = true;
        }
        started.add(dir);
        Path log = dir.resolveSibling(dir.getFileName() + ".log");
        String out;
        int rc;
        try {
            Process p = new ProcessBuilder("python3", script.toString(), "up", dir.toString(), "--only",
                    String.join(",", names)).redirectErrorStream(true).redirectOutput(log.toFile()).start();
            if (!p.waitFor(240, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
                rc = -1;
            } else {
                rc = p.exitValue();
            }
            out = Files.readString(log, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalStateException("cannot run python3 " + script + ": " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while starting " + names, e);
        }
        if (rc != 0) {
            throw new IllegalStateException("python3 " + script + " up " + dir + " --only " + String.join(",", names)
                    + " failed (" + (rc == -1 ? "timed out" : "exit " + rc) + "):\n" + out);
        }
        try {
            env.putAll(parseEnv(Files.readString(dir.resolve("env"), StandardCharsets.UTF_8)));
        } catch (IOException e) {
            throw new IllegalStateException("topology.py wrote no " + dir.resolve("env") + ":\n" + out, e);
        }
        for (String name : names) {
            if (!described(name)) {
                throw new IllegalStateException(dir.resolve("env") + " does not describe " + name + ":\n" + out);
            }
        }
    }

    synchronized void stopAll() {
        for (Path dir : started) {
            try {
                Process p = new ProcessBuilder("python3", repoRoot().resolve("tests/topology/topology.py").toString(),
                        "down", dir.toString()).redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
                if (p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0) {
                    deleteTree(dir);
                    Files.deleteIfExists(dir.resolveSibling(dir.getFileName() + ".log"));
                } else {
                    System.err.println("topology: could not stop the servers under " + dir);
                }
            } catch (IOException | RuntimeException e) {
                System.err.println("topology: could not stop the servers under " + dir + ": " + e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        started.clear();
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path f : (Iterable<Path>) files.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(f);
            }
        }
    }

    /** The repository root: the first directory above the working directory holding tests/topology/topology.py. */
    static Path repoRoot() {
        for (Path d = Paths.get("").toAbsolutePath(); d != null; d = d.getParent()) {
            if (Files.isRegularFile(d.resolve("tests/topology/topology.py"))) {
                return d;
            }
        }
        throw new IllegalStateException("tests/topology/topology.py not found above " + Paths.get("").toAbsolutePath());
    }

    /** {@code export NAME=value} lines, values quoted as Python's shlex.quote does (a small POSIX-shell subset). */
    static Map<String, String> parseEnv(String text) {
        Map<String, String> out = new HashMap<>();
        for (String line : text.split("\n")) {
            line = line.strip();
            if (line.startsWith("export ")) {
                line = line.substring("export ".length()).strip();
            }
            int eq = line.indexOf('=');
            if (line.isEmpty() || line.startsWith("#") || eq <= 0) {
                continue;
            }
            out.put(line.substring(0, eq), unquote(line.substring(eq + 1)));
        }
        return out;
    }

    private static String unquote(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\'') {
                int end = s.indexOf('\'', i + 1);
                if (end < 0) {
                    throw new IllegalArgumentException("unclosed quote in " + s);
                }
                b.append(s, i + 1, end);
                i = end;
            } else if (c == '"') {
                for (i++; i < s.length() && s.charAt(i) != '"'; i++) {
                    if (s.charAt(i) == '\\' && i + 1 < s.length() && "$`\"\\".indexOf(s.charAt(i + 1)) >= 0) {
                        i++;
                    }
                    b.append(s.charAt(i));
                }
            } else if (c == '\\' && i + 1 < s.length()) {
                b.append(s.charAt(++i));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    private String get(String name) {
        String v = env.get(name);
        if (v == null) {
            throw new IllegalStateException(name + " is not set: call require() first");
        }
        return v;
    }

    // ---- TLS -----------------------------------------------------------------

    /** rediss://127.0.0.1:PORT/0?ssl_ca_certs=.../ca.crt: the server (without client authentication). */
    public String tlsUrl() {
        return get("RL_TEST_TLS_URL");
    }

    public String tlsHost() {
        return URI.create(tlsUrl()).getHost();
    }

    public int tlsPort() {
        return URI.create(tlsUrl()).getPort();
    }

    /** The server that requires a client certificate (tls-auth-clients yes). */
    public int tlsClientAuthPort() {
        return Integer.parseInt(get("RL_TEST_TLS_CLIENTAUTH_PORT"));
    }

    /** The server whose certificate names another host (wrong.example). */
    public int tlsBadHostPort() {
        return Integer.parseInt(get("RL_TEST_TLS_BADHOST_PORT"));
    }

    /** ca.crt, client.crt, client.key, other-ca.crt (an unrelated CA). */
    public Path tlsFile(String name) {
        return Paths.get(get("RL_TEST_TLS_DIR")).resolve(name);
    }

    // ---- Sentinel and Cluster ----------------------------------------------------

    public String sentinelUrl() {
        return get("RL_TEST_SENTINEL_URL");
    }

    /** A sentinel whose default user is off: the URL carries sentinel_username and sentinel_password. */
    public String sentinelAclUrl() {
        return get("RL_TEST_SENTINEL_ACL_URL");
    }

    public String clusterUrl() {
        return get("RL_TEST_CLUSTER_URL");
    }

    /** The URL of a topology by name. */
    public String url(String name) {
        switch (name) {
            case TLS:
                return tlsUrl();
            case SENTINEL:
                return sentinelUrl();
            case CLUSTER:
                return clusterUrl();
            default:
                throw new IllegalArgumentException("unknown topology " + name);
        }
    }
}
