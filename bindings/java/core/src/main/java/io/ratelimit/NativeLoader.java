package io.ratelimit;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * Loads libratelimit_jni: an explicit path (-Dratelimit.native.path), then
 * java.library.path, then the copy inside the jar for this platform
 * (native/&lt;os&gt;-&lt;arch&gt;/, picked by os.name and os.arch, linux-musl-&lt;arch&gt;/ on musl's
 * libc), extracted to a unique temp
 * file (so two class loaders or two JVMs never share or clobber one file).
 */
final class NativeLoader {
    static final String PATH_PROPERTY = "ratelimit.native.path";
    static final String LIBRARY = "ratelimit_jni";

    private static String loadedFrom;

    private NativeLoader() {}

    static synchronized void load() {
        if (loadedFrom != null) {
            return;
        }
        String explicit = System.getProperty(PATH_PROPERTY);
        if (explicit != null && !explicit.isEmpty()) {
            // asked for this file: failing loudly beats silently using another
            System.load(Paths.get(explicit).toAbsolutePath().toString());
            loadedFrom = explicit;
            return;
        }
        UnsatisfiedLinkError fromPath;
        try {
            System.loadLibrary(LIBRARY);
            loadedFrom = "java.library.path";
            return;
        } catch (UnsatisfiedLinkError e) {
            fromPath = e;
        }
        String platform = platform();
        String resource = resource(platform);
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new UnsatisfiedLinkError(missing(platform, available(), fromPath.getMessage()));
            }
            String tmpdir = System.getProperty("ratelimit.native.tmpdir", System.getProperty("java.io.tmpdir"));
            Path file = Files.createTempFile(Paths.get(tmpdir), "libratelimit_jni-", ".so");
            try {
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                try {
                    System.load(file.toAbsolutePath().toString());
                } catch (UnsatisfiedLinkError e) {
                    throw new UnsatisfiedLinkError("ratelimit: the jar's " + platform + " native library does not "
                            + "load here (the linux ones need glibc >= 2.17, the linux-musl ones musl's libc, "
                            + "the macOS ones macOS 11 on arm64, 10.13 on x86_64): " + e.getMessage() + "; "
                            + FROM_SOURCE);
                }
                loadedFrom = "jar:" + resource;
            } finally {
                // the loaded mapping stays valid after unlinking; nothing left behind
                Files.deleteIfExists(file);
            }
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("ratelimit: cannot extract " + resource + ": " + e);
        }
    }

    /** The platforms a jar may carry, as scripts/dist.sh and the Maven build name them. */
    static final List<String> KNOWN = List.of("linux-x86_64", "linux-aarch64", "linux-musl-x86_64",
            "linux-musl-aarch64", "darwin-x86_64", "darwin-aarch64");

    static final String FROM_SOURCE = "build the native library from source (bindings/java/README.md) and pass "
            + "-D" + PATH_PROPERTY + "=/path/to/" + System.mapLibraryName(LIBRARY);

    static String resource(String platform) {
        return "/native/" + platform + "/" + System.mapLibraryName(LIBRARY);
    }

    /** The known platforms this class path carries a native library for. */
    static List<String> available() {
        List<String> found = new ArrayList<>();
        for (String p : KNOWN) {
            if (NativeLoader.class.getResource(resource(p)) != null) {
                found.add(p);
            }
        }
        return found;
    }

    static String missing(String platform, List<String> available, String pathError) {
        return "ratelimit: no native library for " + platform + " in this jar (it has "
                + (available.isEmpty() ? "none" : String.join(", ", available)) + ") nor on java.library.path ("
                + pathError + "); " + FROM_SOURCE;
    }

    /** Where the library came from (for diagnostics). */
    static synchronized String loadedFrom() {
        return loadedFrom;
    }

    static String platform() {
        String p = platform(System.getProperty("os.name", ""), System.getProperty("os.arch", ""));
        return p.startsWith("linux-") && isMusl() ? "linux-musl-" + p.substring("linux-".length()) : p;
    }

    /**
     * Whether this JVM runs on musl's libc (Alpine): its loader is mapped into
     * the process. A file on disk proves nothing (Debian's musl package installs
     * /lib/ld-musl-x86_64.so.1 beside glibc).
     */
    static boolean isMusl() {
        try (Stream<String> maps = Files.lines(Paths.get("/proc/self/maps"))) {
            return maps.anyMatch(NativeLoader::mapsMusl);
        } catch (IOException | UncheckedIOException e) {
            return false;
        }
    }

    /** A line of /proc/self/maps that maps musl's libc (Alpine: /lib/ld-musl-x86_64.so.1). */
    static boolean mapsMusl(String line) {
        int slash = line.lastIndexOf('/');
        String file = line.substring(slash + 1);
        return slash >= 0 && (file.startsWith("ld-musl-") || file.startsWith("libc.musl-"));
    }

    /** {@code <os>-<arch>} from os.name and os.arch: linux-x86_64, linux-aarch64, darwin-aarch64... */
    static String platform(String osName, String osArch) {
        String os = osName.toLowerCase(Locale.ROOT);
        String arch = osArch.toLowerCase(Locale.ROOT);
        if (os.startsWith("linux")) {
            os = "linux";
        } else if (os.startsWith("mac")) {
            os = "darwin";
        } else if (os.startsWith("windows")) {
            os = "windows";
        }
        if (arch.equals("amd64") || arch.equals("x86_64")) {
            arch = "x86_64";
        } else if (arch.equals("arm64")) {
            arch = "aarch64";
        }
        return os + "-" + arch;
    }
}
