package io.ratelimit;

import java.security.NoSuchAlgorithmException;
import java.security.NoSuchProviderException;
import java.security.Provider;
import java.security.SecureRandom;
import java.security.SecureRandomSpi;

/**
 * For the Windows JVM under Wine only (scripts/windows-test.sh jar lists it
 * as the first security provider). SUN's SecureRandom seeds itself once from
 * the network adapters (SeedGenerator.getSystemEntropy), where Temurin 25's
 * net.dll calls GetAnycastIpAddressTable, which Wine 8 lacks: the JVM dies
 * (0xc06d007f) at the first UUID.randomUUID or @TempDir. This is SUN's
 * SHA1PRNG seeded from the system's seed source (CryptGenRandom) instead.
 */
public final class WineSecureRandom extends Provider {
    public WineSecureRandom() {
        super("WineSecureRandom", "1", "SUN's SHA1PRNG seeded without the network adapters (Wine 8)");
        put("SecureRandom.SHA1PRNG", Spi.class.getName());
    }

    public static final class Spi extends SecureRandomSpi {
        private final SecureRandom prng;

        public Spi() throws NoSuchAlgorithmException, NoSuchProviderException {
            prng = SecureRandom.getInstance("SHA1PRNG", "SUN");
            // seeded before its first use, it never reaches getSystemEntropy
            prng.setSeed(prng.generateSeed(32));
        }

        @Override
        protected void engineSetSeed(byte[] seed) {
            prng.setSeed(seed);
        }

        @Override
        protected void engineNextBytes(byte[] bytes) {
            prng.nextBytes(bytes);
        }

        @Override
        protected byte[] engineGenerateSeed(int numBytes) {
            return prng.generateSeed(numBytes);
        }
    }
}
