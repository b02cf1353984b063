package io.ratelimit.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The jar's spring-configuration-metadata.json (what IDEs complete) describes every ratelimit.* property. */
class MetadataTest {
    @Test
    void everyPropertyIsDescribed() throws Exception {
        Map<String, JsonNode> props = new HashMap<>();
        try (InputStream in = getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertNotNull(in, "no metadata: is the configuration processor on the annotation processor path?");
            new ObjectMapper().readTree(in).get("properties").forEach(p -> props.put(p.get("name").asText(), p));
        }
        // an enum type: IDEs offer its values (raise, allow, deny)
        assertEquals("io.ratelimit.OnRedisError", props.get("ratelimit.on-redis-error").get("type").asText());
        for (String name : new String[] {"ratelimit.url", "ratelimit.prefix", "ratelimit.timeout",
            "ratelimit.connect-timeout", "ratelimit.command-timeout", "ratelimit.pool-size", "ratelimit.on-redis-error",
            "ratelimit.reconnect-max", "ratelimit.enabled", "ratelimit.tls.ca-file", "ratelimit.tls.cert-file",
            "ratelimit.tls.key-file", "ratelimit.tls.verify", "ratelimit.web.redis-error-status",
            "ratelimit.web.headers", "ratelimit.web.problem-details", "ratelimit.limits"}) {
            JsonNode p = props.remove(name);
            assertNotNull(p, name + " missing");
            assertTrue(p.hasNonNull("description") && !p.get("description").asText().isBlank(), name + ": " + p);
        }
        assertTrue(props.isEmpty(), "undocumented here: " + props.keySet());
    }
}
