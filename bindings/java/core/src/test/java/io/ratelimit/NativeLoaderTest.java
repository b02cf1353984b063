package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The jar's natives are picked by os.name and os.arch; a platform without one is named in the error. */
class NativeLoaderTest {
    @Test
    void platformFromOsNameAndArch() {
        assertEquals("linux-x86_64", NativeLoader.platform("Linux", "amd64"));
        assertEquals("linux-x86_64", NativeLoader.platform("Linux", "x86_64"));
        assertEquals("linux-aarch64", NativeLoader.platform("Linux", "aarch64"));
        assertEquals("darwin-aarch64", NativeLoader.platform("Mac OS X", "aarch64"));
        assertEquals("darwin-aarch64", NativeLoader.platform("Mac OS X", "arm64"));
        assertEquals("linux-riscv64", NativeLoader.platform("Linux", "riscv64"));
        assertEquals("windows-x86_64", NativeLoader.platform("Windows 11", "amd64"));
    }

    @Test
    void thisPlatformIsCarried() {
        RateLimitClient.hasTls(); // loads the library
        assertTrue(NativeLoader.available().contains(NativeLoader.platform()), NativeLoader.available().toString());
    }

    @Test
    void aMissingPlatformIsNamedWithWhatTheJarHas() {
        String m = NativeLoader.missing("linux-riscv64", List.of("linux-x86_64", "linux-aarch64"),
                "no ratelimit_jni in java.library.path");
        assertTrue(m.startsWith("ratelimit: no native library for linux-riscv64 in this jar "
                + "(it has linux-x86_64, linux-aarch64) nor on java.library.path"), m);
        assertTrue(m.contains("-Dratelimit.native.path="), m);
        assertTrue(NativeLoader.missing("linux-riscv64", List.of(), "x").contains("(it has none)"));
    }
}
