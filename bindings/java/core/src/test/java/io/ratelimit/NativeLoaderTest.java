package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

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
        assertEquals("windows-x86_64", NativeLoader.platform("Windows Server 2022", "amd64"));
        assertEquals("windows-aarch64", NativeLoader.platform("Windows 11", "aarch64"));
    }

    @Test
    void eachPlatformsFileIsNamedAsItsJvmMapsIt() {
        assertEquals("/native/windows-x86_64/ratelimit_jni.dll", NativeLoader.resource("windows-x86_64"));
        assertEquals("/native/linux-musl-aarch64/libratelimit_jni.so", NativeLoader.resource("linux-musl-aarch64"));
        assertEquals("/native/darwin-aarch64/libratelimit_jni.dylib", NativeLoader.resource("darwin-aarch64"));
        // this JVM's own mapping (Windows': ratelimit_jni.dll, under Wine by scripts/windows-test.sh jar)
        assertEquals(System.mapLibraryName(NativeLoader.LIBRARY), NativeLoader.fileName(NativeLoader.platform()));
        assertTrue(NativeLoader.KNOWN.contains("windows-x86_64"));
    }

    /** Windows cannot delete a loaded DLL: the copy is marked, and a later load deletes it once it can. */
    @Test
    void copiesThatCannotBeDeletedAreMarkedAndSweptLater(@TempDir Path dir) throws Exception {
        Path gone = Files.createFile(dir.resolve("ratelimit_jni-1.dll"));
        NativeLoader.remove(gone);
        assertFalse(Files.exists(gone));
        assertFalse(Files.exists(dir.resolve("ratelimit_jni-1.dll.delete")));

        // a copy the system refuses to delete (here: a non-empty directory, as a loaded DLL on Windows)
        Path loaded = Files.createDirectory(dir.resolve("ratelimit_jni-2.dll"));
        Files.createFile(loaded.resolve("busy"));
        NativeLoader.remove(loaded);
        assertTrue(Files.exists(loaded));
        assertTrue(Files.exists(dir.resolve("ratelimit_jni-2.dll.delete")));
        // a copy marked by a JVM that has exited, and files that are not ours
        Path exited = Files.createFile(dir.resolve("ratelimit_jni-3.dll"));
        Files.createFile(dir.resolve("ratelimit_jni-3.dll.delete"));
        Path other = Files.createFile(dir.resolve("libratelimit_jni-4.so"));
        Files.createFile(dir.resolve("libratelimit_jni-4.so.delete"));
        Path unmarked = Files.createFile(dir.resolve("ratelimit_jni-5.dll"));

        NativeLoader.sweep(dir, "ratelimit_jni-", ".dll");
        assertFalse(Files.exists(exited));
        assertFalse(Files.exists(dir.resolve("ratelimit_jni-3.dll.delete")));
        assertTrue(Files.exists(loaded), "still loaded: kept");
        assertTrue(Files.exists(dir.resolve("ratelimit_jni-2.dll.delete")), "still loaded: still marked");
        assertTrue(Files.exists(other));
        assertTrue(Files.exists(unmarked), "never loaded, or loading now: not ours to delete");

        Files.delete(loaded.resolve("busy"));
        NativeLoader.sweep(dir, "ratelimit_jni-", ".dll");
        try (Stream<Path> left = Files.list(dir)) {
            assertEquals(List.of("libratelimit_jni-4.so", "libratelimit_jni-4.so.delete", "ratelimit_jni-5.dll"),
                    left.map(p -> p.getFileName().toString()).sorted().toList());
        }
        NativeLoader.sweep(dir.resolve("missing"), "ratelimit_jni-", ".dll"); // never fails
    }

    @Test
    void extractedCopiesHaveUniqueNamesReadableByTheirOwnerOnly(@TempDir Path dir) throws Exception {
        Path a = NativeLoader.createUnique(dir, "libratelimit_jni-", ".so");
        Path b = NativeLoader.createUnique(dir, "libratelimit_jni-", ".so");
        assertFalse(a.equals(b));
        String name = a.getFileName().toString();
        assertTrue(name.startsWith("libratelimit_jni-" + ProcessHandle.current().pid() + "-") && name.endsWith(".so"), name);
        // where the file system has POSIX permissions (Windows' has none: the copy takes %TEMP%'s ACL)
        if (dir.getFileSystem().supportedFileAttributeViews().contains("posix")) {
            assertEquals("rw-------", java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(a)));
        }
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
        // a jar from scripts/dist.sh carries every platform, each seen from here whatever its file's name
        if (NativeLoader.available().size() > 1) {
            assertTrue(NativeLoader.available().containsAll(List.of("windows-x86_64", "windows-aarch64")),
                    NativeLoader.available().toString());
        }
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
