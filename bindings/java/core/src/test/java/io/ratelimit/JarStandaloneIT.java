package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarFile;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The packaged jar, copied alone to an empty directory, runs with nothing else but Redis. */
class JarStandaloneIT {
    static RedisServer redis;

    @TempDir
    Path dir;

    @BeforeAll
    static void start() throws Exception {
        redis = RedisServer.start();
    }

    @AfterAll
    static void stop() throws Exception {
        redis.close();
    }

    private Path copyJar() throws Exception {
        String built = System.getProperty("ratelimit.jar");
        assertNotNull(built, "failsafe passes -Dratelimit.jar");
        Path jar = dir.resolve("ratelimit.jar");
        Files.copy(Paths.get(built), jar);
        return jar;
    }

    /** Runs a fresh JVM in the temp dir with a bare environment; returns {exit code, output}. */
    private Object[] java(String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-Xcheck:jni");
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/bin:/bin");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        return new Object[] {p.exitValue(), out};
    }

    @Test
    void runsFromTheJarAlone() throws Exception {
        copyJar();
        // as docs/spring.md says to run it on the class path (on Java 24+ a run without it warns: below)
        Object[] r = java("--enable-native-access=ALL-UNNAMED", "-cp", "ratelimit.jar", "io.ratelimit.Demo", redis.url());
        String out = (String) r[1];
        assertEquals(0, r[0], out);
        assertTrue(out.contains("admitted 3 of 5"), out);
        assertTrue(out.contains("native library from jar:/native/" + NativeLoader.platform() + "/libratelimit_jni.so"),
                out);
        assertTrue(!out.contains("WARNING"), "-Xcheck:jni complained:\n" + out);
        // the extracted copy is removed once loaded
        try (var files = Files.list(dir)) {
            assertEquals(List.of(dir.resolve("ratelimit.jar")), files.toList());
        }
        // java -jar works too (Main-Class in the manifest)
        r = java("-jar", "ratelimit.jar", redis.url());
        assertEquals(0, r[0], (String) r[1]);
        assertTrue(!((String) r[1]).contains("WARNING"), (String) r[1]);
        assertEquals(0, redis.dbsize(), "the demo cleans up after itself");
    }

    /**
     * JEP 472: from Java 24 on, the loader's System.load warns on stderr unless
     * native access is enabled for the class path, by the flag or by an
     * executable jar's manifest (this jar's Enable-Native-Access); a later JDK
     * may refuse instead. Below 24 nothing warns either way.
     */
    @Test
    void nativeAccessIsEnabledByTheFlagOrTheExecutableJarsManifest() throws Exception {
        Path jar = copyJar();
        try (JarFile j = new JarFile(jar.toFile())) {
            assertEquals("ALL-UNNAMED", j.getManifest().getMainAttributes().getValue("Enable-Native-Access"));
        }
        String restricted = "WARNING: A restricted method in java.lang.System has been called";

        Object[] plain = java("-cp", "ratelimit.jar", "io.ratelimit.Demo", redis.url());
        assertEquals(0, plain[0], (String) plain[1]);
        assertEquals(Runtime.version().feature() >= 24, ((String) plain[1]).contains(restricted),
                "Java " + Runtime.version() + ":\n" + plain[1]);

        Object[] flag = java("--enable-native-access=ALL-UNNAMED", "-cp", "ratelimit.jar", "io.ratelimit.Demo",
                redis.url());
        assertEquals(0, flag[0], (String) flag[1]);
        assertFalse(((String) flag[1]).contains("WARNING"), (String) flag[1]);

        Object[] manifest = java("-jar", "ratelimit.jar", redis.url());
        assertEquals(0, manifest[0], (String) manifest[1]);
        assertFalse(((String) manifest[1]).contains("WARNING"), (String) manifest[1]);
    }

    @Test
    void aPlatformWithoutANativeIsNamed() throws Exception {
        copyJar();
        Object[] r = java("-Dos.arch=riscv64", "-cp", "ratelimit.jar", "io.ratelimit.Demo", redis.url());
        String out = (String) r[1];
        assertNotEquals(0, r[0], out);
        assertTrue(out.contains("ratelimit: no native library for linux-riscv64 in this jar (it has "
                + String.join(", ", NativeLoader.available()) + ")"), out);
    }

    @Test
    void explicitNativePathWinsAndFailsLoudly() throws Exception {
        Path jar = copyJar();
        Path so = dir.resolve("custom-libratelimit_jni.so");
        try (ZipFile zip = new ZipFile(jar.toFile())) {
            ZipEntry e = zip.getEntry("native/" + NativeLoader.platform() + "/libratelimit_jni.so");
            assertNotNull(e);
            try (InputStream in = zip.getInputStream(e)) {
                Files.copy(in, so);
            }
        }
        Object[] r = java("-Dratelimit.native.path=" + so, "-cp", "ratelimit.jar", "io.ratelimit.Demo", redis.url());
        assertEquals(0, r[0], (String) r[1]);
        assertTrue(((String) r[1]).contains("native library from " + so), (String) r[1]);

        r = java("-Dratelimit.native.path=" + dir.resolve("missing.so"), "-cp", "ratelimit.jar", "io.ratelimit.Demo",
                redis.url());
        assertNotEquals(0, r[0]);
        assertTrue(((String) r[1]).contains("UnsatisfiedLinkError"), (String) r[1]);
    }
}
