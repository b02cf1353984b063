package io.ratelimit.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The header value rules of docs/frameworks.md ("Headers"). */
class RateLimitResponsesTest {
    @Test
    void secondsRoundUpOnWholeMilliseconds() {
        assertEquals(0, RateLimitResponses.seconds(Duration.ZERO));
        assertEquals(1, RateLimitResponses.seconds(Duration.ofMillis(1)));
        assertEquals(1, RateLimitResponses.seconds(Duration.ofMillis(1000)));
        assertEquals(2, RateLimitResponses.seconds(Duration.ofMillis(1001)));
        assertEquals(1, RateLimitResponses.seconds(Duration.ofNanos(1_500_000)));   // 1.5 ms is 1 whole ms
    }

    @Test
    void namesAreStructuredFieldStrings() {
        assertEquals("\"app.read_item\"", RateLimitResponses.sfString("app.read_item"));
        assertEquals("\"a\\\"b\\\\c\"", RateLimitResponses.sfString("a\"b\\c"));
        assertEquals("\"caf? ?\"", RateLimitResponses.sfString("café \t"));
    }
}
