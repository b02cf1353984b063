package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * The shared conformance vectors ({@code <repo>/tests/vectors/*.json}) run
 * through the Java binding, step for step as the C runner
 * (tests/vectors/run_vectors.c) runs them: FLUSHALL before each case, a
 * client with the document's prefix (and client_id), the explicit clock of
 * {@link Limiter#at(long)} for limiter steps, and exact comparison of every
 * result (with granted and rate_index when the document says "fields": "all")
 * and of the keys in Redis. A step's own spec replaces the case's (a rate
 * change), "stored": true uses the spec stored in Redis, and config_set /
 * config_get / config_delete steps store, read and delete specs. Limiters
 * are made as the C runner passes specs: without the creation-time check
 * against the stored spec. One dynamic test per case.
 *
 * <p>The vectors are found by walking up from the working directory to the
 * directory holding {@code tests/vectors} (or from {@code -Dratelimit.vectors=DIR}).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class VectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    /** Numbers compare by value (the files hold ints, results are longs); everything else exactly. */
    private static final Comparator<JsonNode> SAME = (a, b) -> a.equals(b)
            || (a.isNumber() && b.isNumber() && a.decimalValue().compareTo(b.decimalValue()) == 0) ? 0 : 1;
    private static final int MIN_STEPS = 150;

    private static RedisServer redis;
    private static final AtomicLong executedSteps = new AtomicLong();

    @BeforeAll
    static void startRedis() throws Exception {
        redis = RedisServer.start();
    }

    @AfterAll
    static void stopRedis() throws Exception {
        if (redis != null) {
            redis.close();
        }
    }

    // ---- locating and reading the vectors ----------------------------------------

    static Path vectorsDir() {
        String override = System.getProperty("ratelimit.vectors");
        if (override != null && !override.isEmpty()) {
            Path dir = Paths.get(override).toAbsolutePath();
            assertTrue(Files.isDirectory(dir), "-Dratelimit.vectors=" + override + " is not a directory");
            return dir;
        }
        Path start = Paths.get(System.getProperty("user.dir")).toAbsolutePath();
        for (Path p = start; p != null; p = p.getParent()) {
            Path dir = p.resolve("tests").resolve("vectors");
            if (Files.isDirectory(dir)) {
                return dir;
            }
        }
        return fail("no tests/vectors directory above " + start + ": the conformance vectors are missing");
    }

    /** Every *.json in the vectors directory except skeletons, sorted; never empty. */
    static List<Path> vectorFiles() throws IOException {
        Path dir = vectorsDir();
        List<Path> files;
        try (Stream<Path> s = Files.list(dir)) {
            files = s.filter(p -> p.getFileName().toString().endsWith(".json"))
                    .filter(p -> !p.getFileName().toString().contains("skeleton"))
                    .sorted()
                    .collect(Collectors.toList());
        }
        assertFalse(files.isEmpty(), "no conformance vectors (*.json) in " + dir);
        return files;
    }

    static JsonNode load(Path file) throws IOException {
        JsonNode doc = JSON.readTree(file.toFile());
        assertTrue(doc.path("cases").isArray() && doc.path("cases").size() > 0, file + ": no \"cases\"");
        return doc;
    }

    private static String text(JsonNode o, String key, String dflt) {
        JsonNode v = o.get(key);
        return v != null && v.isTextual() ? v.asText() : dflt;
    }

    private static long num(JsonNode o, String key, long dflt) {
        JsonNode v = o.get(key);
        return v != null && v.isNumber() ? v.asLong() : dflt;
    }

    // ---- tests -------------------------------------------------------------------------

    @TestFactory
    @Order(1)
    Stream<DynamicNode> vectors() throws IOException {
        List<DynamicNode> files = new ArrayList<>();
        for (Path file : vectorFiles()) {
            JsonNode doc = load(file);
            String stem = file.getFileName().toString().replaceFirst("\\.json$", "");
            String prefix = text(doc, "prefix", "rl");
            String clientId = text(doc, "client_id", null);
            boolean allFields = text(doc, "fields", "").equals("all");
            List<DynamicTest> cases = new ArrayList<>();
            int index = 0;
            for (JsonNode c : doc.get("cases")) {
                int i = index++;
                String name = stem + "-" + i + " " + text(c, "name", "?");
                cases.add(DynamicTest.dynamicTest(name, file.toUri(), () -> runCase(stem, prefix, clientId, allFields, c, i)));
            }
            files.add(DynamicContainer.dynamicContainer(stem, file.toUri(), cases.stream()));
        }
        return files.stream();
    }

    /** Runs after the vectors: they can never silently run zero (or too few) steps. */
    @Test
    @Order(2)
    void everyVectorStepRan() throws IOException {
        long total = 0;
        for (Path file : vectorFiles()) {
            for (JsonNode c : load(file).get("cases")) {
                total += c.path("steps").size();
            }
        }
        assertTrue(total >= MIN_STEPS, "only " + total + " steps in the vector files, expected at least " + MIN_STEPS);
        assertEquals(total, executedSteps.get(),
                "steps executed by vectors() (a case that stopped early, or vectors() did not run)");
        assertTrue(executedSteps.get() >= MIN_STEPS);
    }

    // ---- one case, as run_vectors.c runs it ----------------------------------------------

    private static void runCase(String file, String prefix, String clientId, boolean allFields, JsonNode c, int index)
            throws Exception {
        redis.flushAll();
        JsonNode spec = c.get("spec");
        Map<String, String> saved = new HashMap<>();
        ClientOptions options = ClientOptions.defaults().prefix(prefix).timeout(Duration.ofSeconds(5))
                .clientId(clientId);
        try (RateLimitClient client = RateLimitClient.connect(redis.url(), options)) {
            int i = 0;
            for (JsonNode step : c.path("steps")) {
                String op = text(step, "op", "");
                String where = file + " case " + index + " '" + text(c, "name", "?") + "' step " + i++ + " (" + op
                        + ")";
                executedSteps.incrementAndGet();
                if (op.equals("keys")) {
                    keysStep(step, where);
                } else if (op.equals("sleep")) {
                    Thread.sleep(num(step, "ms", 0));
                } else if (op.startsWith("config_")) {
                    settle(step, where, () -> configStep(client, step, op));
                } else {
                    settle(step, where, spec != null ? () -> limiterStep(client, spec, step, op, allFields, where)
                            : () -> primitiveStep(client, step, op, saved, where));
                }
            }
        }
    }

    private interface Step {
        /** The actual result, or null for an operation without one (reset). */
        ObjectNode run() throws Exception;
    }

    /** Runs a step and checks it against expect / expect_error, like expects_error() + settle() in C. */
    private static void settle(JsonNode step, String where, Step run) throws Exception {
        String wantError = text(step, "expect_error", null);
        ObjectNode actual;
        try {
            actual = run.run();
        } catch (RateLimitException e) {
            String got = errorName(e);
            if (wantError == null) {
                fail(where + ": error " + got + " (" + e + "), expected success", e);
            }
            assertEquals(wantError, got, where + ": error kind (" + e + ")");
            return;
        }
        if (wantError != null) {
            fail(where + ": success (" + actual + "), expected error " + wantError);
        }
        if (actual == null) {
            return;
        }
        JsonNode expect = step.get("expect");
        assertNotNull(expect, where + ": got " + actual + ", but the file has no expectation");
        if (!expect.equals(SAME, actual)) {
            fail(where + ": got " + actual + ", expected " + expect);
        }
    }

    private static String errorName(RateLimitException e) {
        switch (e.status()) {
            case INVALID:
                return "invalid";
            case CONNECTION:
                return "connection";
            case TIMEOUT:
                return "timeout";
            case REDIS:
                return "redis";
            default:
                return "other";
        }
    }

    /**
     * A spec object (algorithm, limit, period_ms, burst, optional more[],
     * initial_tokens in the core's values, scope) as read_spec() reads it.
     */
    private static LimiterConfig readSpec(JsonNode spec) {
        long[] rates = new long[3 + 3 * (1 + spec.path("more").size())];
        rates[0] = Algorithm.fromName(text(spec, "algorithm", "")).ordinal();
        rates[1] = num(spec, "initial_tokens", 0);
        rates[2] = text(spec, "scope", "overall").equals("per_client") ? 1 : 0;
        int i = 3;
        rates[i++] = num(spec, "limit", 0);
        rates[i++] = num(spec, "period_ms", 0);
        rates[i++] = num(spec, "burst", 0);
        for (JsonNode r : spec.path("more")) {
            rates[i++] = num(r, "limit", 0);
            rates[i++] = num(r, "period_ms", 0);
            rates[i++] = num(r, "burst", 0);
        }
        return LimiterConfig.fromNative(rates);
    }

    /** The same schema back, defaults left out, as write_spec() writes it. */
    private static ObjectNode writeSpec(LimiterConfig config) {
        long[] spec = config.toNative();
        ObjectNode j = NODES.objectNode();
        j.put("algorithm", config.algorithm().wireName());
        j.put("limit", spec[3]);
        j.put("period_ms", spec[4]);
        j.put("burst", spec[5]);
        if (spec.length > 6) {
            ArrayNode more = j.putArray("more");
            for (int i = 6; i + 2 < spec.length; i += 3) {
                ObjectNode r = more.addObject();
                r.put("limit", spec[i]);
                r.put("period_ms", spec[i + 1]);
                r.put("burst", spec[i + 2]);
            }
        }
        if (spec[1] != 0) {
            j.put("initial_tokens", spec[1]);
        }
        if (config.isPerClient()) {
            j.put("scope", "per_client");
        }
        return j;
    }

    private static ObjectNode configStep(RateLimitClient client, JsonNode step, String op) {
        String name = text(step, "name", "");
        ObjectNode a = NODES.objectNode();
        switch (op) {
            case "config_set": {
                LimiterConfig config = readSpec(step.path("spec"));
                boolean set = true;
                if (step.path("if_absent").asBoolean(false)) {
                    set = client.configureIfAbsent(name, config);
                } else {
                    client.configure(name, config);
                }
                a.put("set", set);
                return a;
            }
            case "config_get": {
                Optional<LimiterConfig> stored = client.getConfig(name);
                a.put("found", stored.isPresent());
                stored.ifPresent(config -> a.set("spec", writeSpec(config)));
                return a;
            }
            case "config_delete":
                a.put("deleted", client.deleteConfig(name));
                return a;
            default:
                return fail("unknown operation '" + op + "'");
        }
    }

    private static ObjectNode limiterStep(RateLimitClient client, JsonNode caseSpec, JsonNode step, String op,
            boolean allFields, String where) {
        // a step's own spec replaces the case's (a rate change)
        JsonNode spec = step.has("spec") ? step.get("spec") : caseSpec;
        String name = text(spec, "name", "");
        // as the C runner: the spec goes with each request, unchecked against the stored one
        Limiter limiter = new Limiter(client, name, step.path("stored").asBoolean(false) ? null : readSpec(spec));
        String id = text(step, "id", "");
        long permits = num(step, "permits", 1);
        Limiter.AtTime at = limiter.at(num(step, "now_ms", 0));
        Result r;
        switch (op) {
            case "reset":
                limiter.reset(id);
                return null;
            case "acquire":
                r = at.acquire(id, permits);
                break;
            case "peek":
                r = at.peek(id, permits);
                break;
            case "reserve":
                r = at.reserve(id, permits, Duration.ofMillis(num(step, "max_wait_ms", 0)));
                break;
            case "acquire_up_to":
                r = at.acquireAtMost(id, permits);
                break;
            case "refund":
                r = at.refund(id, permits);
                break;
            default:
                return fail(where + ": unknown limiter operation '" + op + "'");
        }
        ObjectNode a = NODES.objectNode();
        a.put("allowed", r.allowed());
        a.put("limit", r.limit());
        a.put("remaining", r.remaining());
        a.put("retry_after_ms", r.retryAfterMs());
        a.put("reset_after_ms", r.resetAfterMs());
        a.put("wait_ms", r.waitMs());
        if (allFields) {
            a.put("granted", r.granted());
            a.put("rate_index", r.rateIndex());
        }
        return a;
    }

    private static ObjectNode primitiveStep(RateLimitClient client, JsonNode step, String op,
            Map<String, String> saved, String where) {
        String name = text(step, "name", text(step, "queue", ""));
        Duration timeout = Duration.ofMillis(num(step, "timeout_ms", 0));
        Duration lease = Duration.ofMillis(num(step, "lease_ms", 0));
        long permitsMax = num(step, "permits_max", 0);
        ObjectNode a = NODES.objectNode();
        switch (op) {
            case "semaphore_acquire": {
                Optional<Permit> p = client.semaphore(name, permitsMax, lease).tryAcquire(timeout);
                save(step, saved, p.map(Permit::id));
                a.put("acquired", p.isPresent());
                return a;
            }
            case "lock_acquire": {
                Optional<Lock> l = client.lock(name, lease).tryAcquire(timeout);
                save(step, saved, l.map(Lock::token));
                a.put("acquired", l.isPresent());
                return a;
            }
            case "semaphore_release":
                a.put("done", permit(client, name, step, saved).release());
                return a;
            case "semaphore_refresh":
                a.put("done", permit(client, name, step, saved).refresh(lease));
                return a;
            case "lock_release":
                a.put("done", lock(client, name, step, saved).release());
                return a;
            case "lock_extend":
                a.put("done", lock(client, name, step, saved).extend(lease));
                return a;
            case "semaphore_holders":
                a.put("count", client.semaphore(name, permitsMax, Duration.ofSeconds(1)).holders());
                return a;
            case "semaphore_available":
                a.put("count", client.semaphore(name, permitsMax, Duration.ofSeconds(1)).available());
                return a;
            case "queue_push":
                a.put("added", client.delayQueue(name).push(text(step, "message", ""),
                        Duration.ofMillis(num(step, "delay_ms", 0))));
                return a;
            case "queue_remove":
                a.put("done", client.delayQueue(name).remove(text(step, "message", "")));
                return a;
            case "queue_size":
                a.put("count", client.delayQueue(name).size());
                return a;
            case "queue_pop_ready": {
                ArrayNode list = a.putArray("messages");
                for (String m : client.delayQueue(name).popReady((int) num(step, "max", 0))) {
                    list.add(m);
                }
                return a;
            }
            default:
                return fail(where + ": unknown operation '" + op + "'");
        }
    }

    /** save_as: names the permit for later steps (an empty id when none was granted, as in C). */
    private static void save(JsonNode step, Map<String, String> saved, Optional<String> id) {
        String as = text(step, "save_as", null);
        if (as != null) {
            saved.put(as, id.orElse(""));
        }
    }

    /** "permit": a saved name, else a literal (unknown) id. A fresh handle each time, as C passes the id. */
    private static NativePermit ref(JsonNode step, Map<String, String> saved) {
        String ref = text(step, "permit", "");
        return new NativePermit(saved.getOrDefault(ref, ref), 0, 0);
    }

    private static Permit permit(RateLimitClient client, String name, JsonNode step, Map<String, String> saved) {
        return new Permit(client, false, name, Native.name("name", name), ref(step, saved));
    }

    private static Lock lock(RateLimitClient client, String name, JsonNode step, Map<String, String> saved) {
        return new Lock(new Permit.Lease(client, true, name, Native.name("name", name), ref(step, saved)));
    }

    /** Every key in Redis, sorted, with its type and PTTL bounds; every key must expire but stored specs. */
    private static void keysStep(JsonNode step, String where) throws IOException {
        JsonNode expect = step.get("expect_keys");
        assertTrue(expect != null && expect.isArray(), where + ": no expect_keys");
        List<String> names = new ArrayList<>(redis.keys());
        Collections.sort(names);
        Map<String, String> types = new HashMap<>();
        Map<String, Long> pttls = new HashMap<>();
        List<String> described = new ArrayList<>();
        for (String key : names) {
            types.put(key, (String) redis.command("TYPE", key));
            pttls.put(key, (Long) redis.command("PTTL", key));
            described.add(key + " " + types.get(key) + " pttl=" + pttls.get(key));
        }
        for (String key : names) {
            // stored specs (":config:") live until deleted; everything else expires
            assertTrue(pttls.get(key) >= 0 || key.contains(":config:"),
                    where + ": " + key + " has no TTL; every key must expire " + described);
        }
        List<String> wantNames = new ArrayList<>();
        expect.forEach(k -> wantNames.add(text(k, "key", "?")));
        assertEquals(wantNames, names, where + ": keys " + described);
        for (JsonNode k : expect) {
            String key = text(k, "key", "?");
            long pttl = pttls.get(key), min = num(k, "pttl_min", 0), max = num(k, "pttl_max", 0);
            assertEquals(text(k, "type", "?"), types.get(key), where + ": TYPE " + key);
            assertTrue(pttl >= min && pttl <= max,
                    where + ": PTTL " + key + " = " + pttl + ", expected [" + min + ", " + max + "]");
        }
    }
}
