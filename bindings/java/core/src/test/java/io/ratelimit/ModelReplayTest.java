package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * The model-checked sequences ({@code <repo>/tests/model/sequences.json}:
 * random requests of every algorithm with the results the reference model
 * and the Python binding agree on) replayed through the Java binding: every
 * result field and what each step did to each key (its TTL, untouched, or
 * deleted) must be the same.
 *
 * <p>As tests/model/harness.py does it, keys expire on the explicit clock:
 * before a step the keys its "expire" lists are deleted and the step's keys
 * saved (DUMP); after it each key's expiry is read between two TIME readings
 * that bracket the call, then moved far into the future ({@link #PARKED}), so
 * a key the step left alone shows that expiry and one left without a TTL
 * shows too. A key written with a TTL of a few ms can expire for real before
 * it is parked: then the step runs again from its saved state.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ModelReplayTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int MIN_STEPS = 3000;
    private static final int RACE_RETRIES = 30;
    /** The expiry of a key between steps (ms since the epoch: the year 3000). */
    static final long PARKED = 32503680000000L;

    private static RedisServer redis;
    private static Resp resp;
    private static final AtomicLong executedSteps = new AtomicLong();

    @BeforeAll
    static void start() throws Exception {
        redis = RedisServer.start();
        resp = new Resp(redis.port);
    }

    @AfterAll
    static void stop() throws Exception {
        if (resp != null) {
            resp.close();
        }
        if (redis != null) {
            redis.close();
        }
    }

    static Path sequencesFile() {
        String override = System.getProperty("ratelimit.model");
        if (override != null && !override.isEmpty()) {
            return Paths.get(override).toAbsolutePath();
        }
        Path start = Paths.get(System.getProperty("user.dir")).toAbsolutePath();
        for (Path p = start; p != null; p = p.getParent()) {
            Path file = p.resolve("tests").resolve("model").resolve("sequences.json");
            if (Files.isRegularFile(file)) {
                return file;
            }
        }
        return fail("no tests/model/sequences.json above " + start);
    }

    static JsonNode load() throws IOException {
        return JSON.readTree(sequencesFile().toFile());
    }

    @TestFactory
    @Order(1)
    Stream<DynamicTest> sequences() throws IOException {
        JsonNode doc = load();
        List<DynamicTest> tests = new ArrayList<>();
        int i = 0;
        for (JsonNode seq : doc.get("sequences")) {
            int index = i++;
            tests.add(DynamicTest.dynamicTest("sequence " + index + " " + seq.get("algorithm").asText(),
                    () -> replay(doc, seq, index)));
        }
        return tests.stream();
    }

    /** Runs after the sequences: they can never silently run zero (or too few) steps. */
    @Test
    @Order(2)
    void everyStepRan() throws IOException {
        long total = 0;
        for (JsonNode seq : load().get("sequences")) {
            total += seq.get("steps").size();
        }
        assertTrue(total >= MIN_STEPS, "only " + total + " steps in sequences.json");
        assertEquals(total, executedSteps.get(), "steps replayed (a sequence stopped early, or none ran)");
    }

    // ---- one sequence ---------------------------------------------------------------------

    private static void replay(JsonNode doc, JsonNode seq, int index) throws Exception {
        String prefix = doc.get("prefix").asText(), name = doc.get("name").asText();
        String algorithm = seq.get("algorithm").asText();
        List<LimiterConfig> specs = new ArrayList<>();
        for (JsonNode spec : seq.get("specs")) {
            specs.add(config(spec));
        }
        resp.call("FLUSHALL");
        ClientOptions options = ClientOptions.defaults().prefix(prefix).timeout(Duration.ofSeconds(10));
        try (RateLimitClient client = RateLimitClient.connect(redis.url(), options)) {
            int i = 0;
            for (JsonNode step : seq.get("steps")) {
                String where = "sequence " + index + " (" + algorithm + ") step " + i++ + " " + step;
                // as the other bindings pass specs: unchecked against a stored one (there is none)
                Limiter limiter = new Limiter(client, name, specs.get(step.get("spec").asInt()));
                List<String> keys = new ArrayList<>();
                for (int r = 0; r < 3; r++) {
                    keys.add(prefix + ":{" + name + ":" + step.get("id").asText() + "}:" + algorithm
                            + (r > 0 ? ":" + (r + 1) : ""));
                }
                runStep(limiter, step, keys, where);
                executedSteps.incrementAndGet();
            }
        }
    }

    /** A spec of the file: {algorithm, initial_tokens (null full, 0 empty, n), rates: [[limit, period_ms, burst]]}. */
    private static LimiterConfig config(JsonNode spec) {
        JsonNode rates = spec.get("rates");
        long[] n = new long[3 + 3 * rates.size()];
        n[0] = Algorithm.fromName(spec.get("algorithm").asText()).ordinal();
        JsonNode initial = spec.get("initial_tokens");
        n[1] = initial.isNull() ? 0 : initial.asLong() == 0 ? -1 : initial.asLong(); // the core's: 0 full, -1 empty
        int at = 3;
        for (JsonNode r : rates) {
            for (int f = 0; f < 3; f++) {
                n[at++] = r.get(f).asLong();
            }
        }
        return LimiterConfig.fromNative(n);
    }

    private static void runStep(Limiter limiter, JsonNode step, List<String> keys, String where) throws Exception {
        JsonNode want = step.get("keys");
        for (JsonNode k : step.path("expire")) {
            resp.call("DEL", k.asText());
        }
        Map<String, byte[]> saved = new LinkedHashMap<>();
        for (String k : keys) {
            saved.put(k, (byte[]) resp.call("DUMP", k));
        }
        long t0 = timeMs();
        Object actual = null;
        long t1 = 0;
        long[] expiry = new long[keys.size()];
        for (int attempt = 0;; attempt++) {
            actual = call(limiter, step);
            t1 = timeMs();
            for (int r = 0; r < keys.size(); r++) {
                expiry[r] = (Long) resp.call("PEXPIRETIME", keys.get(r));
                long parked = (Long) resp.call("PEXPIREAT", keys.get(r), String.valueOf(PARKED));
                if (expiry[r] >= 0 && parked == 0) {
                    expiry[r] = -2; // it expired between the two
                }
            }
            long t2 = timeMs();
            boolean raced = false;
            for (int r = 0; r < keys.size(); r++) {
                // a key written with a TTL shorter than the call and its reading took may have expired for real
                raced |= want.get(r).isNumber() && expiry[r] == -2 && want.get(r).asLong() <= t2 - t0 + 1;
            }
            if (!raced) {
                break;
            }
            if (attempt == RACE_RETRIES) {
                fail(where + ": keys kept expiring before they could be read: machine too slow?");
            }
            for (Map.Entry<String, byte[]> e : saved.entrySet()) {
                resp.call("DEL", e.getKey());
                if (e.getValue() != null) {
                    resp.call("RESTORE", e.getKey(), String.valueOf(PARKED), e.getValue(), "ABSTTL");
                }
            }
            Thread.sleep(Math.min(50, 2L * attempt));
            t0 = timeMs();
        }
        if (step.has("expect_error")) {
            assertEquals(step.get("expect_error").asText(), actual, where);
        } else if (step.has("expect")) {
            long[] expect = new long[8];
            for (int f = 0; f < 8; f++) {
                expect[f] = step.get("expect").get(f).asLong();
            }
            if (!(actual instanceof long[]) || !Arrays.equals(expect, (long[]) actual)) {
                fail(where + "\n  got      " + (actual instanceof long[] ? Arrays.toString((long[]) actual) : actual)
                        + "\n  expected " + Arrays.toString(expect));
            }
        }
        for (int r = 0; r < keys.size(); r++) {
            JsonNode w = want.get(r);
            String key = keys.get(r);
            if (w.isNumber()) {
                long ttl = w.asLong();
                assertTrue(expiry[r] >= 0, where + ": " + key + " should be written with TTL " + ttl + " (PEXPIRETIME "
                        + expiry[r] + ")");
                assertTrue(expiry[r] - t1 <= ttl && ttl <= expiry[r] - t0, where + ": " + key + ": TTL " + ttl
                        + " expected, set " + (expiry[r] - t1) + ".." + (expiry[r] - t0));
            } else if (w.asText().equals("kept")) {
                assertEquals(PARKED, expiry[r], where + ": " + key + " should be untouched (-1: it has no TTL)");
            } else {
                assertEquals(-2, expiry[r], where + ": " + key + " should not exist");
            }
        }
    }

    /** The eight fields, "invalid", or null (reset). */
    private static Object call(Limiter limiter, JsonNode step) {
        String op = step.get("op").asText(), id = step.get("id").asText();
        long permits = step.path("permits").asLong(1);
        Limiter.AtTime at = limiter.at(step.get("now_ms").asLong());
        Result r;
        try {
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
                case "acquire_up_to":
                    r = at.acquireAtMost(id, permits);
                    break;
                case "refund":
                    r = at.refund(id, permits);
                    break;
                case "reserve":
                    r = at.reserve(id, permits, Duration.ofMillis(step.get("max_wait_ms").asLong()));
                    break;
                default:
                    return fail("unknown op " + op);
            }
        } catch (InvalidArgumentException e) {
            return "invalid";
        }
        return new long[] {r.allowed() ? 1 : 0, r.limit(), r.remaining(), r.retryAfterMs(), r.resetAfterMs(),
            r.waitMs(), r.granted(), r.rateIndex()};
    }

    private static long timeMs() throws IOException {
        List<?> t = (List<?>) resp.call("TIME");
        return Long.parseLong(new String((byte[]) t.get(0), StandardCharsets.US_ASCII)) * 1000
                + Long.parseLong(new String((byte[]) t.get(1), StandardCharsets.US_ASCII)) / 1000;
    }
}
