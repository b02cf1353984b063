package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
    void muslIsToldByItsLoaderMappedIntoTheProcess() {
        assertTrue(NativeLoader.mapsMusl("7f3c1e200000-7f3c1e214000 r--p 00000000 08:01 1234 /lib/ld-musl-x86_64.so.1"));
        assertTrue(NativeLoader.mapsMusl("ffff8a000000-ffff8a014000 r-xp 00000000 08:01 99 /lib/libc.musl-aarch64.so.1"));
        assertFalse(NativeLoader.mapsMusl("7f3c1e200000-7f3c1e214000 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6"));
        assertFalse(NativeLoader.mapsMusl("7f3c1e200000-7f3c1e214000 rw-p 00000000 00:00 0 "));
        assertFalse(NativeLoader.mapsMusl("7f3c1e200000-7f3c1e214000 r--p 00000000 08:01 7 /opt/musl-notes/x.so"));
        // this machine runs glibc (Debian, Ubuntu): the glibc natives, even where a musl is installed beside it
        assertFalse(NativeLoader.isMusl());
        assertEquals(NativeLoader.platform(System.getProperty("os.name"), System.getProperty("os.arch")),
                NativeLoader.platform());
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
