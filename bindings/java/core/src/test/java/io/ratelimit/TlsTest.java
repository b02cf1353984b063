package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * rediss:// against the TLS servers of tests/topology: a CA from the URL or
 * from ClientOptions, a wrong CA, host-name checks, client certificates.
 */
@ExtendWith(Topology.Extension.class)
class TlsTest {
    static Topology topo;
    /** Keys of this run only: the servers may be shared with other suites. */
    static final String PREFIX = "jtls-" + UUID.randomUUID();

    @BeforeAll
    static void servers(Topology topology) {
        assumeTrue(RateLimitClient.hasTls(),
                "this native library was built without TLS (hiredis without hiredis_ssl): rediss:// is not supported");
        topo = topology.require(Topology.TLS);
    }

    private static ClientOptions options() {
        return ClientOptions.defaults().prefix(PREFIX).timeout(Duration.ofSeconds(2));
    }

    /** rediss://127.0.0.1:port/0 with no options in the URL. */
    private static String bare(int port) {
        return "rediss://" + topo.tlsHost() + ":" + port + "/0";
    }

    private static void admitsExactly(RateLimitClient client, int limit) {
        Limiter lim = client.limiter("tls-" + UUID.randomUUID(), Rate.of(limit, Duration.ofDays(1)),
                Algorithm.FIXED_WINDOW);
        int admitted = 0;
        for (int i = 0; i < limit + 2; i++) {
            Result r = lim.acquire("u");
            assertFalse(r.fallback(), r.toString());
            if (r.allowed()) {
                admitted++;
            }
        }
        assertEquals(limit, admitted);
    }

    @Test
    void caFromTheUrl() {
        try (RateLimitClient c = RateLimitClient.connect(topo.tlsUrl(), options())) {
            admitsExactly(c, 3);
            try (Permit p = c.semaphore("tls-sem-" + UUID.randomUUID(), 1, Duration.ofSeconds(10))
                    .acquire(Duration.ofSeconds(1))) {
                assertTrue(p.fencingToken() > 0);
            }
        }
    }

    @Test
    void caFromClientOptions() {
        // as a Path and as a String
        try (RateLimitClient c = RateLimitClient.connect(bare(topo.tlsPort()),
                options().tlsCaFile(topo.tlsFile("ca.crt")))) {
            admitsExactly(c, 2);
        }
        try (RateLimitClient c = RateLimitClient.connect(bare(topo.tlsPort()),
                options().tlsCaFile(topo.tlsFile("ca.crt").toString()).tlsVerify(TlsVerify.REQUIRED))) {
            admitsExactly(c, 2);
        }
    }

    @Test
    void wrongCaFailsWithACertificateError() {
        // ClientOptions override the URL's ssl_ca_certs
        ConnectionException e = assertThrows(ConnectionException.class, () -> RateLimitClient.connect(topo.tlsUrl(),
                options().tlsCaFile(topo.tlsFile("other-ca.crt"))));
        assertEquals(Status.CONNECTION, e.status());
        assertTrue(e.getMessage().contains("certificate verify failed"), e.getMessage());
        // "self-signed certificate in certificate chain" or "unable to get local issuer certificate"
        assertTrue(e.getMessage().contains("self-signed") || e.getMessage().contains("issuer"), e.getMessage());

        // the same through the URL alone
        e = assertThrows(ConnectionException.class, () -> RateLimitClient.connect(
                bare(topo.tlsPort()) + "?ssl_ca_certs=" + topo.tlsFile("other-ca.crt"), options()));
        assertTrue(e.getMessage().contains("certificate verify failed"), e.getMessage());
    }

    @Test
    void verifyNoneAcceptsAWrongHostNameRequiredDoesNot() {
        String badHost = bare(topo.tlsBadHostPort());
        ConnectionException e = assertThrows(ConnectionException.class, () -> RateLimitClient.connect(badHost,
                options().tlsCaFile(topo.tlsFile("ca.crt")).tlsVerify(TlsVerify.REQUIRED)));
        assertTrue(e.getMessage().contains("certificate verify failed"), e.getMessage());
        // "IP address mismatch" for 127.0.0.1 ("hostname mismatch" for a name)
        assertTrue(e.getMessage().contains("mismatch"), e.getMessage());
        // DEFAULT verifies too
        assertThrows(ConnectionException.class,
                () -> RateLimitClient.connect(badHost, options().tlsCaFile(topo.tlsFile("ca.crt"))));

        try (RateLimitClient c = RateLimitClient.connect(badHost, options().tlsVerify(TlsVerify.NONE))) {
            admitsExactly(c, 2);
        }
        // the URL's ssl_cert_reqs=none, and REQUIRED in the options overriding it
        String urlNone = badHost + "?ssl_cert_reqs=none";
        try (RateLimitClient c = RateLimitClient.connect(urlNone, options())) {
            admitsExactly(c, 1);
        }
        assertThrows(ConnectionException.class, () -> RateLimitClient.connect(urlNone,
                options().tlsCaFile(topo.tlsFile("ca.crt")).tlsVerify(TlsVerify.REQUIRED)));
    }

    @Test
    void clientCertificate() {
        String url = bare(topo.tlsClientAuthPort());
        ClientOptions ca = options().tlsCaFile(topo.tlsFile("ca.crt"));
        // the server refuses a client without a certificate
        RateLimitException e = assertThrows(RateLimitException.class, () -> RateLimitClient.connect(url, ca));
        assertTrue(e instanceof ConnectionException, e.toString());

        try (RateLimitClient c = RateLimitClient.connect(url,
                ca.tlsCertFile(topo.tlsFile("client.crt")).tlsKeyFile(topo.tlsFile("client.key")))) {
            admitsExactly(c, 2);
        }
        // all three in the URL
        String inUrl = url + "?ssl_ca_certs=" + topo.tlsFile("ca.crt") + "&ssl_certfile=" + topo.tlsFile("client.crt")
                + "&ssl_keyfile=" + topo.tlsFile("client.key");
        try (RateLimitClient c = RateLimitClient.connect(inUrl, options())) {
            admitsExactly(c, 1);
        }
    }

    @Test
    void badTlsFilesAreInvalidArguments() {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> RateLimitClient.connect(
                topo.tlsUrl(), options().tlsCaFile(topo.tlsFile("no-such-ca.crt"))));
        assertTrue(e.getMessage().contains("no-such-ca.crt"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> RateLimitClient.connect(topo.tlsUrl(),
                options().tlsCertFile(topo.tlsFile("no-such-client.crt"))));
        assertTrue(e.getMessage().contains("no-such-client.crt"), e.getMessage());
        // a key without a certificate
        assertThrows(InvalidArgumentException.class, () -> RateLimitClient.connect(topo.tlsUrl(),
                options().tlsKeyFile(topo.tlsFile("client.key"))));
    }
}
