package io.ratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.ratelimit.Algorithm;
import io.ratelimit.ConnectionException;
import io.ratelimit.InvalidArgumentException;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RedisServer;
import io.ratelimit.Result;
import io.ratelimit.TlsVerify;
import io.ratelimit.Topology;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** ratelimit.* properties reach the client: TLS files and checks, reconnect pause, every URL form. */
@ExtendWith(Topology.Extension.class)
class RateLimitPropertiesTest {
    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
            .withPropertyValues("ratelimit.prefix=jspring-" + UUID.randomUUID(), "ratelimit.timeout=2s");

    @Test
    void bindsTlsAndReconnectProperties() {
        runner.withPropertyValues("ratelimit.enabled=false", "ratelimit.tls.ca-file=/etc/ca.pem",
                "ratelimit.tls.cert-file=/etc/c.pem", "ratelimit.tls.key-file=/etc/k.pem", "ratelimit.tls.verify=none",
                "ratelimit.reconnect-max=5s").withUserConfiguration(Props.class).run(ctx -> {
                    RateLimitProperties p = ctx.getBean(RateLimitProperties.class);
                    assertEquals("/etc/ca.pem", p.getTls().getCaFile());
                    assertEquals("/etc/c.pem", p.getTls().getCertFile());
                    assertEquals("/etc/k.pem", p.getTls().getKeyFile());
                    assertEquals(TlsVerify.NONE, p.getTls().getVerify());
                    assertEquals(Duration.ofSeconds(5), p.getReconnectMax());
                    String o = p.toClientOptions().toString();
                    assertTrue(o.contains("tlsCaFile=/etc/ca.pem") && o.contains("tlsCertFile=/etc/c.pem")
                            && o.contains("tlsKeyFile=/etc/k.pem") && o.contains("tlsVerify=NONE")
                            && o.contains("reconnectMax=PT5S"), o);
                });
    }

    @EnableConfigurationProperties(RateLimitProperties.class)
    static class Props {}

    @Test
    void badOptionsFailTheContextWithTheCoreMessage() {
        runner.withPropertyValues("ratelimit.url=redis://127.0.0.1:1", "ratelimit.tls.ca-file=/etc/ca.pem")
                .run(ctx -> {
                    assertThat(ctx).hasFailed();
                    assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(InvalidArgumentException.class)
                            .hasMessageContaining("rediss://");
                });
    }

    @Test
    void raiseFailsTheContextOnADeadPortAllowDoesNot() throws Exception {
        String url = "redis://127.0.0.1:" + RedisServer.freePort();
        runner.withPropertyValues("ratelimit.url=" + url, "ratelimit.on-redis-error=raise").run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(ConnectionException.class);
        });
        runner.withPropertyValues("ratelimit.url=" + url, "ratelimit.on-redis-error=allow").run(ctx -> {
            assertThat(ctx).hasNotFailed();
            Result r = ctx.getBean(RateLimitClient.class).limiter("p", "1/minute", Algorithm.GCRA).acquire("u");
            assertTrue(r.allowed() && r.fallback(), r.toString());
        });
    }

    @Test
    void sentinelAndClusterUrls(Topology topology) {
        topology.require(Topology.SENTINEL, Topology.CLUSTER);
        for (String url : new String[] {topology.sentinelUrl(), topology.clusterUrl()}) {
            runner.withPropertyValues("ratelimit.url=" + url).run(ctx -> {
                assertThat(ctx).hasNotFailed();
                assertAdmitsOne(ctx.getBean(RateLimitClient.class));
            });
        }
    }

    @Test
    void tlsProperties(Topology topology) {
        assumeTrue(RateLimitClient.hasTls(), "this native library was built without TLS");
        Topology t = topology.require(Topology.TLS);
        String host = "rediss://" + t.tlsHost() + ":";
        // the URL form, with ssl_ca_certs
        runner.withPropertyValues("ratelimit.url=" + t.tlsUrl())
                .run(ctx -> assertAdmitsOne(ctx.getBean(RateLimitClient.class)));
        // ca-file
        runner.withPropertyValues("ratelimit.url=" + host + t.tlsPort(), "ratelimit.tls.ca-file=" + t.tlsFile("ca.crt"))
                .run(ctx -> assertAdmitsOne(ctx.getBean(RateLimitClient.class)));
        // verify: none accepts the wrong host name, required does not
        runner.withPropertyValues("ratelimit.url=" + host + t.tlsBadHostPort(), "ratelimit.tls.verify=none")
                .run(ctx -> assertAdmitsOne(ctx.getBean(RateLimitClient.class)));
        runner.withPropertyValues("ratelimit.url=" + host + t.tlsBadHostPort(),
                "ratelimit.tls.ca-file=" + t.tlsFile("ca.crt"), "ratelimit.tls.verify=required").run(ctx -> {
                    assertThat(ctx).hasFailed();
                    assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(ConnectionException.class)
                            .hasMessageContaining("certificate verify failed");
                });
        // a client certificate
        runner.withPropertyValues("ratelimit.url=" + host + t.tlsClientAuthPort(),
                "ratelimit.tls.ca-file=" + t.tlsFile("ca.crt"), "ratelimit.tls.cert-file=" + t.tlsFile("client.crt"),
                "ratelimit.tls.key-file=" + t.tlsFile("client.key"))
                .run(ctx -> assertAdmitsOne(ctx.getBean(RateLimitClient.class)));
    }

    private static void assertAdmitsOne(RateLimitClient client) {
        var lim = client.limiter("props-" + UUID.randomUUID(), "1/hour", Algorithm.FIXED_WINDOW);
        Result first = lim.acquire("u");
        assertTrue(first.allowed() && !first.fallback(), first.toString());
        assertFalse(lim.acquire("u").allowed());
    }
}
