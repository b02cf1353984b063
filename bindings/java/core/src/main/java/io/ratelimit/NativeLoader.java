package io.ratelimit;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads libratelimit_jni: an explicit path (-Dratelimit.native.path), then
 * java.library.path, then the copy inside the jar, extracted to a unique temp
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
        String resource = "/native/" + platform() + "/" + System.mapLibraryName(LIBRARY);
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in == null) {
                UnsatisfiedLinkError e = new UnsatisfiedLinkError("ratelimit: no native library for "
                        + platform() + " (" + resource + " is not in the jar, and " + fromPath.getMessage() + ")");
                throw e;
            }
            String tmpdir = System.getProperty("ratelimit.native.tmpdir", System.getProperty("java.io.tmpdir"));
            Path file = Files.createTempFile(Paths.get(tmpdir), "libratelimit_jni-", ".so");
            try {
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                System.load(file.toAbsolutePath().toString());
                loadedFrom = "jar:" + resource;
            } finally {
                // the loaded mapping stays valid after unlinking; nothing left behind
                Files.deleteIfExists(file);
            }
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("ratelimit: cannot extract " + resource + ": " + e);
        }
    }

    /** Where the library came from (for diagnostics). */
    static synchronized String loadedFrom() {
        return loadedFrom;
    }

    static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
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
