package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.nio.file.Paths;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Every bad input throws InvalidArgumentException with the core's message and writes nothing. */
class ValidationTest extends RedisTestBase {

    static Stream<Arguments> badCalls() {
        Duration s = Duration.ofSeconds(1);
        return Stream.of(
                bad("rate text", () -> Rate.parse("ten per minute")),
                bad("rate zero", () -> Rate.parse("0/s")),
                bad("rate unit", () -> Rate.parse("10/parsec")),
                bad("rate null", () -> Rate.parse(null)),
                bad("limit zero", () -> lim(Rate.of(0, s), Algorithm.GCRA).acquire("u")),
                bad("limit negative", () -> lim(Rate.of(-5, s), Algorithm.FIXED_WINDOW).acquire("u")),
                bad("period zero", () -> lim(Rate.of(5, Duration.ZERO), Algorithm.SLIDING_WINDOW).acquire("u")),
                bad("period negative", () -> lim(Rate.of(5, Duration.ofSeconds(-1)), Algorithm.TOKEN_BUCKET)
                        .acquire("u")),
                bad("period huge", () -> lim(Rate.of(5, Duration.ofDays(365 * 1000)), Algorithm.GCRA).acquire("u")),
                bad("burst on fixed window", () -> lim(Rate.parse("5/s").withBurst(7), Algorithm.FIXED_WINDOW)
                        .acquire("u")),
                bad("negative burst", () -> lim(Rate.parse("5/s").withBurst(-1), Algorithm.GCRA).acquire("u")),
                bad("sliding log too big", () -> lim(Rate.parse("2000000000000000/s"), Algorithm.SLIDING_LOG).acquire("u")),
                bad("empty name", () -> client.limiter("", Rate.parse("5/s"), Algorithm.GCRA).acquire("u")),
                bad("null name", () -> client.limiter(null, Rate.parse("5/s"), Algorithm.GCRA).acquire("u")),
                bad("NUL in name", () -> client.limiter("a\0b", Rate.parse("5/s"), Algorithm.GCRA)),
                bad("empty id", () -> lim(Rate.parse("5/s"), Algorithm.GCRA).acquire("")),
                bad("null id", () -> lim(Rate.parse("5/s"), Algorithm.GCRA).acquire(null)),
                bad("NUL in id", () -> lim(Rate.parse("5/s"), Algorithm.GCRA).acquire("u\0v")),
                // ids up to 1 MiB are valid (longer ones are hashed into the key); names up to 1024 bytes
                bad("long id", () -> lim(Rate.parse("5/s"), Algorithm.GCRA).acquire("x".repeat((1 << 20) + 1))),
                bad("long name", () -> client.limiter("n".repeat(1025), Rate.parse("5/s"), Algorithm.GCRA)
                        .acquire("u")),
                bad("zero permits", () -> lim(Rate.parse("5/s"), Algorithm.GCRA).acquire("u", 0)),
                bad("negative permits", () -> lim(Rate.parse("5/s"), Algorithm.SLIDING_LOG).acquire("u", -3)),
                bad("permits over capacity", () -> lim(Rate.parse("5/s"), Algorithm.LEAKY_BUCKET).acquire("u", 6)),
                bad("peek over capacity", () -> lim(Rate.parse("5/s"), Algorithm.FIXED_WINDOW).peek("u", 6)),
                bad("null rate", () -> client.limiter("n", (Rate) null, Algorithm.GCRA)),
                bad("null algorithm", () -> client.limiter("n", Rate.parse("5/s"), null)),
                bad("reserve on sliding log", () -> lim(Rate.parse("5/s"), Algorithm.SLIDING_LOG)
                        .reserve("u", 1, s)),
                bad("reserve negative max wait", () -> lim(Rate.parse("5/s"), Algorithm.GCRA)
                        .reserve("u", 1, Duration.ofMillis(-1))),
                bad("tryAcquire negative timeout", () -> lim(Rate.parse("5/s"), Algorithm.GCRA)
                        .tryAcquire("u", 1, Duration.ofMillis(-5))),
                bad("tryAcquire null timeout", () -> lim(Rate.parse("5/s"), Algorithm.GCRA)
                        .tryAcquire("u", 1, null)),
                bad("batch with one bad request", () -> lim(Rate.parse("5/s"), Algorithm.GCRA)
                        .acquireMany(Arrays.asList("a", "b", ""), 1)),
                bad("reset empty id", () -> lim(Rate.parse("5/s"), Algorithm.GCRA).reset("")),
                bad("semaphore zero permits", () -> client.semaphore("s", 0, s).tryAcquire()),
                bad("semaphore zero lease", () -> client.semaphore("s", 2, Duration.ZERO).tryAcquire()),
                bad("semaphore negative timeout", () -> client.semaphore("s", 2, s).acquire(Duration.ofMillis(-1))),
                bad("semaphore empty name", () -> client.semaphore("", 2, s).tryAcquire()),
                bad("semaphore available zero", () -> client.semaphore("s", 0, s).available()),
                bad("lock zero lease", () -> client.lock("l", Duration.ZERO).tryAcquire()),
                bad("lock null lease", () -> client.lock("l", null)),
                bad("queue empty message", () -> client.delayQueue("q").push("", s)),
                bad("queue null message", () -> client.delayQueue("q").push(null, s)),
                bad("queue negative delay", () -> client.delayQueue("q").push("m", Duration.ofMillis(-1))),
                bad("queue empty name", () -> client.delayQueue("").push("m", s)),
                bad("queue pop zero", () -> client.delayQueue("q").popReady(0)),
                bad("queue pop negative", () -> client.delayQueue("q").pop(-1, s)),
                bad("queue pop too many", () -> client.delayQueue("q").popReady(1_000_000)),
                bad("queue remove empty", () -> client.delayQueue("q").remove("")),
                bad("algorithm name", () -> Algorithm.fromName("leaky")),
                bad("url scheme", () -> RateLimitClient.connect("http://127.0.0.1:6379")),
                bad("url port", () -> RateLimitClient.connect("redis://127.0.0.1:99999")),
                bad("url empty", () -> RateLimitClient.connect("")),
                bad("url ssl_cert_reqs", () -> RateLimitClient.connect("rediss://127.0.0.1:6379?ssl_cert_reqs=maybe")),
                bad("url ssl option on redis://", () -> RateLimitClient.connect(redis.url() + "?ssl_ca_certs=/ca.pem")),
                bad("url unknown option", () -> RateLimitClient.connect(redis.url() + "?colour=blue")),
                bad("url sentinel without service", () -> RateLimitClient.connect("redis+sentinel://127.0.0.1:1")),
                bad("url sentinel_password on redis://", () -> RateLimitClient.connect(
                        redis.url() + "?sentinel_password=x")),
                bad("url cluster db", () -> RateLimitClient.connect("redis+cluster://127.0.0.1:1,127.0.0.1:2/3")),
                bad("url several hosts", () -> RateLimitClient.connect("redis://127.0.0.1:1,127.0.0.1:2")),
                bad("TLS CA on redis://", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().tlsCaFile("/ca.pem"))),
                bad("TLS verify on redis://", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().tlsVerify(TlsVerify.NONE))),
                bad("TLS cert on redis://", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().tlsCertFile(Paths.get("/c.pem")).tlsKeyFile(Paths.get("/k.pem")))),
                bad("TLS empty CA file", () -> RateLimitClient.connect("rediss://127.0.0.1:6379",
                        ClientOptions.defaults().tlsCaFile(""))),
                bad("TLS NUL in key file", () -> RateLimitClient.connect("rediss://127.0.0.1:6379",
                        ClientOptions.defaults().tlsKeyFile("/k\0.pem"))),
                bad("reconnect max zero", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().reconnectMax(Duration.ZERO))),
                bad("reconnect max negative", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().reconnectMax(Duration.ofMillis(-1)))),
                bad("reconnect max huge", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().reconnectMax(Duration.ofMinutes(11)))),
                bad("reconnect max overflow", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().reconnectMax(Duration.ofDays(100_000)))),
                bad("empty prefix", () -> RateLimitClient.connect(redis.url(), ClientOptions.defaults().prefix(""))),
                bad("zero timeout", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().timeout(Duration.ZERO))),
                bad("huge timeout", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().timeout(Duration.ofDays(100)))),
                bad("zero command timeout", () -> RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().commandTimeout(Duration.ZERO))),
                bad("pool size", () -> RateLimitClient.connect(redis.url(), ClientOptions.defaults().poolSize(0))),
                bad("null options", () -> RateLimitClient.connect(redis.url(), null)));
    }

    private static Arguments bad(String what, Executable call) {
        return Arguments.of(what, call);
    }

    private static Limiter lim(Rate rate, Algorithm algorithm) {
        return client.limiter("v", rate, algorithm);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("badCalls")
    void throwsAndWritesNothing(String what, Executable call) throws Exception {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, call, what);
        assertEquals(Status.INVALID, e.status());
        assertFalse(e.getMessage().isEmpty());
        assertEquals(0, redis.dbsize(), what + " wrote to Redis: " + redis.keys());
    }

    @Test
    void messagesComeFromTheCore() {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> lim(Rate.parse("5/s"), Algorithm.GCRA).acquire("u", 9));
        assertTrue(e.getMessage().contains("exceed"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class,
                () -> lim(Rate.parse("5/s"), Algorithm.GCRA).acquireMany(List.of("a", ""), 1));
        assertTrue(e.getMessage().startsWith("request 1:"), e.getMessage());
    }

    /** A Java caller hears Java names and Durations, not period_ms / lease_ms. */
    @Test
    void messagesSpeakJava() {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> lim(Rate.of(5, Duration.ZERO), Algorithm.FIXED_WINDOW).acquire("u"));
        assertEquals("period must be in PT0.001S..PT876000H (got PT0S)", e.getMessage());
        e = assertThrows(InvalidArgumentException.class,
                () -> client.semaphore("s", 2, Duration.ofDays(365L * 1_000_000)).tryAcquire());
        assertTrue(e.getMessage().startsWith("lease is too large (max PT"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class,
                () -> client.limiter("v", Rate.parse("10/s").withBurst(1L << 50), Algorithm.GCRA).acquire("u"));
        assertTrue(e.getMessage().startsWith("burst is too large for this rate (max "), e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> Rate.parse("99999999999999999999/s"));
        assertTrue(e.getMessage().contains("too large (max 4503599627370496)"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().reconnectMax(Duration.ofMinutes(11))));
        assertEquals("reconnectMax is too large (max PT10M, got PT11M)", e.getMessage());
    }

    @Test
    void tlsVersionNamesTheOpenSslInside() {
        String version = RateLimitClient.tlsVersion();
        if (RateLimitClient.hasTls()) {
            assertTrue(version != null && version.matches("OpenSSL \\d+\\.\\d+\\.\\d+.*"), version);
        } else {
            assertNull(version);
        }
    }

    @Test
    void tlsUrlWithoutTlsSupportIsInvalid() {
        assumeFalse(RateLimitClient.hasTls(), "this build speaks TLS");
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> RateLimitClient.connect("rediss://127.0.0.1:6379"));
        assertTrue(e.getMessage().contains("TLS"), e.getMessage());
    }

    @Test
    void optionMessagesNameTheOption() {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> RateLimitClient.connect(
                redis.url(), ClientOptions.defaults().reconnectMax(Duration.ofMinutes(11))));
        assertTrue(e.getMessage().contains("reconnect"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().tlsCaFile("/ca.pem")));
        assertTrue(e.getMessage().contains("rediss://"), e.getMessage());
    }

    @AfterEach
    void stillUsable() {
        // an error leaves the shared client working
        assertTrue(lim(Rate.parse("5/s"), Algorithm.GCRA).peek("ok").allowed());
    }
}
