package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * No password in a message, toString or stack trace. Every password of tests/vectors/url_secrets.txt is
 * S3cr&lt;sep&gt;Xy9z (the sentinels' T0p&lt;sep&gt;Qw8k): no half of one may show, whatever the parser made
 * of the separator.
 */
class SecretsTest {
    static final String[] PARTS = {"S3cr", "Xy9z", "T0p", "Qw8k"};
    static final ClientOptions RAISE = ClientOptions.defaults().onRedisError(OnRedisError.RAISE)
            .timeout(Duration.ofMillis(300));

    /** tests/vectors/url_secrets.txt, shared with C and Python: the first field of each line. */
    static Stream<String> urlsWithPasswords() throws IOException {
        return Files.readAllLines(Topology.repoRoot().resolve("tests/vectors/url_secrets.txt")).stream()
                .filter(line -> !line.isBlank() && !line.startsWith("#")).map(line -> line.split(" ")[0]);
    }

    static String everythingSaid(Throwable e) {
        StringWriter trace = new StringWriter();
        e.printStackTrace(new PrintWriter(trace));
        return e.getMessage() + "\n" + e + "\n" + trace;
    }

    static void assertNoSecret(String said) {
        for (String part : PARTS) {
            assertTrue(!said.contains(part), "'" + part + "' shows in: " + said);
        }
    }

    @ParameterizedTest
    @MethodSource("urlsWithPasswords")
    void noPasswordInExceptions(String url) {
        RateLimitException e = assertThrows(RateLimitException.class, () -> RateLimitClient.connect(url, RAISE));
        assertNoSecret(everythingSaid(e));
    }

    @Test
    void noPasswordInAWorkingClientOrItsErrors() throws Exception {
        try (RedisServer server = RedisServer.start()) {
            server.command("CONFIG", "SET", "requirepass", "S3cr.Xy9z");
            String url = "redis://:S3cr.Xy9z@127.0.0.1:" + server.url().replaceAll(".*:", "") + "/0";
            List<String> said = new ArrayList<>();
            try (RateLimitClient client = RateLimitClient.connect(url, RAISE)) {
                Limiter lim = client.limiter("secret-tostring", "10/s", Algorithm.GCRA);
                Result r = lim.acquire("u");
                assertTrue(r.allowed());
                said.add(client.toString());
                said.add(lim.toString());
                said.add(r.toString());
            }
            // the password the server refuses: its message does not say it either
            String wrong = url.replace("S3cr.Xy9z", "S3cr.Xy9zWRONG");
            said.add(everythingSaid(assertThrows(RateLimitException.class, () -> RateLimitClient.connect(wrong, RAISE))));
            assertEquals(4, said.size());
            said.forEach(SecretsTest::assertNoSecret);
        }
    }
}
