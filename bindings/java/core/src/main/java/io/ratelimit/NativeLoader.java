package io.ratelimit;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryIteratorException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.atomic.AtomicLong;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * Loads libratelimit_jni: an explicit path (-Dratelimit.native.path), then
 * java.library.path, then the copy inside the jar for this platform
 * (native/&lt;os&gt;-&lt;arch&gt;/, picked by os.name and os.arch, linux-musl-&lt;arch&gt;/ on musl's
 * libc), extracted to a unique temp
 * file (so two class loaders or two JVMs never share or clobber one file),
 * deleted once loaded. Windows cannot delete a loaded DLL: there the copy stays
 * while the JVM runs, marked by an empty {@code <file>.delete}, and the next
 * JVM that loads the library from a jar deletes the copies whose JVM has
 * exited (Windows refuses to delete those still loaded).
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
            String name = fileName(platform);
            int dot = name.lastIndexOf('.');
            String prefix = name.substring(0, dot) + "-";
            String suffix = name.substring(dot);
            if (platform.startsWith("windows-")) {
                sweep(Paths.get(tmpdir), prefix, suffix);
            }
            Path file = createUnique(Paths.get(tmpdir), prefix, suffix);
            try {
                try (OutputStream out = Files.newOutputStream(file)) {
                    in.transferTo(out);
                }
                try {
                    System.load(file.toAbsolutePath().toString());
                } catch (UnsatisfiedLinkError e) {
                    throw new UnsatisfiedLinkError("ratelimit: the jar's " + platform + " native library does not "
                            + "load here (the linux ones need glibc >= 2.17, the linux-musl ones musl's libc, "
                            + "the macOS ones macOS 11 on arm64, 10.13 on x86_64, the Windows ones Windows 10): " + e.getMessage() + "; " + FROM_SOURCE);
                }
                loadedFrom = "jar:" + resource;
            } finally {
                remove(file);
            }
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("ratelimit: cannot extract " + resource + ": " + e);
        }
    }

    /**
     * A new file of a name no other loader uses (prefix, this process's id, a
     * counter, suffix), created only if it does not exist (never through a
     * link), readable by its owner only where the file system has POSIX
     * permissions. Not Files.createTempFile: its names come from a
     * SecureRandom, whose seeding on Windows enumerates the network adapters,
     * and that crashes Temurin under Wine 8 (0xc06d007f in
     * NetworkInterface.getAll); a unique name needs no secret.
     */
    static Path createUnique(Path dir, String prefix, String suffix) throws IOException {
        FileAttribute<?>[] owner = dir.getFileSystem().supportedFileAttributeViews().contains("posix")
                ? new FileAttribute<?>[] {PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------"))}
                : new FileAttribute<?>[0];
        String pid = Long.toString(ProcessHandle.current().pid());
        for (int attempt = 0;; attempt++) {
            long n = COPIES.incrementAndGet() + System.nanoTime();
            Path file = dir.resolve(prefix + pid + "-" + Long.toUnsignedString(n, 36) + suffix);
            try {
                return Files.createFile(file, owner);
            } catch (FileAlreadyExistsException taken) {
                if (attempt >= 100) {
                    throw taken;
                }
            }
        }
    }

    private static final AtomicLong COPIES = new AtomicLong();

    /** What marks a loaded copy left to delete (Windows: a DLL cannot be deleted while loaded). */
    static final String DELETE_MARKER = ".delete";

    /**
     * Deletes an extracted copy: on Linux and macOS at once (the loaded mapping
     * stays valid after unlinking); where the system refuses (Windows, while
     * the DLL is loaded) it marks the copy for {@link #sweep} and never fails.
     */
    static void remove(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException inUse) {
            try {
                Files.createFile(file.resolveSibling(file.getFileName() + DELETE_MARKER));
            } catch (IOException ignored) {
                // best effort: the copy stays in the temp directory
            }
        }
    }

    /**
     * Deletes the marked copies in dir ({@code prefix*suffix.delete}) that can
     * be deleted now, with their markers: those whose JVM has exited. A copy
     * another JVM still has loaded cannot be deleted, and keeps its marker.
     */
    static void sweep(Path dir, String prefix, String suffix) {
        try (DirectoryStream<Path> markers = Files.newDirectoryStream(dir, prefix + "*" + suffix + DELETE_MARKER)) {
            for (Path marker : markers) {
                String name = marker.getFileName().toString();
                Path copy = marker.resolveSibling(name.substring(0, name.length() - DELETE_MARKER.length()));
                try {
                    Files.deleteIfExists(copy);
                    Files.deleteIfExists(marker);
                } catch (IOException stillLoaded) {
                    // loaded by a JVM still running: the next sweep
                }
            }
        } catch (IOException | DirectoryIteratorException e) {
            // nothing to sweep, or not ours to list: loading goes on
        }
    }

    /** The platforms a jar may carry, as scripts/dist.sh and the Maven build name them. */
    static final List<String> KNOWN = List.of("linux-x86_64", "linux-aarch64", "linux-musl-x86_64",
            "linux-musl-aarch64", "darwin-x86_64", "darwin-aarch64", "windows-x86_64", "windows-aarch64");

    static final String FROM_SOURCE = "build the native library from source (bindings/java/README.md) and pass "
            + "-D" + PATH_PROPERTY + "=/path/to/" + System.mapLibraryName(LIBRARY);

    static String resource(String platform) {
        return "/native/" + platform + "/" + fileName(platform);
    }

    /**
     * The library's file name on a platform, as that platform's JVM maps it
     * (System.mapLibraryName there): libratelimit_jni.so, libratelimit_jni.dylib,
     * ratelimit_jni.dll. Named per platform so that a jar's other natives are
     * seen (available()) from any of them.
     */
    static String fileName(String platform) {
        if (platform.startsWith("windows-")) {
            return LIBRARY + ".dll";
        } else if (platform.startsWith("darwin-")) {
            return "lib" + LIBRARY + ".dylib";
        } else if (platform.startsWith("linux-")) {
            return "lib" + LIBRARY + ".so";
        }
        return System.mapLibraryName(LIBRARY);
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
