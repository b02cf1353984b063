"""Builds ratelimit._ratelimit: the C core, the embedded Lua scripts and the
CPython extension in one shared object, with hiredis linked statically, and
TLS (hiredis_ssl + OpenSSL) when hiredis is >= 1.0.

hiredis: $RL_HIREDIS_PREFIX, else build/deps/hiredis (scripts/hiredis.sh),
else pkg-config's; $HIREDIS_STATIC_LIB names pkg-config's libhiredis.a
explicitly. Without TLS the build stops and says how to get it, unless
RL_TLS=0 asks for a build without TLS."""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def core_version():
    # the header is the one place the version is written down
    with open(os.path.join(ROOT, "core", "include", "ratelimit.h")) as f:
        text = f.read()
    parts = [re.search(r"#define RL_VERSION_%s (\d+)" % p, text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def pkg_config(*args):
    try:
        return subprocess.run(["pkg-config", *args], check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


INSTALL_HINT = ("install it: Debian/Ubuntu: apt-get install libhiredis-dev (and libssl-dev for TLS; on Debian "
                "bookworm scripts/hiredis.sh builds hiredis 1.2 with TLS); Fedora: dnf install hiredis-devel "
                "openssl-devel; macOS: brew install hiredis openssl")


TLS_HINT = ("For TLS, provide hiredis >= 1.0 with hiredis_ssl and OpenSSL's headers (Debian 12: scripts/hiredis.sh "
            "in the repository builds them into build/deps/hiredis, which this build then uses; Ubuntu 24.04, "
            "Debian 13: apt-get install libhiredis-dev libssl-dev; Fedora: dnf install hiredis-devel openssl-devel; "
            "macOS: brew install hiredis openssl) or install a ratelimit-core wheel (built with TLS). "
            "To build without TLS on purpose: RL_TLS=0 pip install .")


def env_off(name):
    return os.environ.get(name, "").strip().lower() in ("0", "off", "no", "false")


def default_lib_dirs():
    dirs = []
    try:
        multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    except OSError:
        multiarch = ""
    if multiarch:
        dirs += ["/usr/lib/" + multiarch, "/usr/local/lib/" + multiarch]
    return dirs + ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/local/lib", "/usr/lib64",
                   "/usr/lib", "/opt/homebrew/lib"]


def hiredis_candidates():
    """(include root holding hiredis/hiredis.h, library dirs, where from), best
    first: $RL_HIREDIS_PREFIX, build/deps/hiredis (scripts/hiredis.sh), then
    pkg-config's hiredis. RL_HIREDIS_PREFIX set (even empty, or to a prefix
    without hiredis) leaves build/deps/hiredis out. Only without a pkg-config at all are the usual
    directories searched."""
    explicit = os.environ.get("RL_HIREDIS_PREFIX")
    prefixes = [explicit] if explicit else []
    if explicit is None:
        prefixes.append(os.path.join(ROOT, "build", "deps", "hiredis"))
    for p in prefixes:
        yield os.path.join(p, "include"), [os.path.join(p, "lib"), os.path.join(p, "lib64")], p
    try:
        subprocess.run(["pkg-config", "--version"], capture_output=True)
    except OSError:  # no pkg-config at all
        for root in ("/usr/local", "/opt/homebrew", "/usr"):
            yield os.path.join(root, "include"), [os.path.join(root, "lib")] + default_lib_dirs(), root
        return
    if pkg_config_ok("hiredis"):
        # includedir is the root (1.x) or root/hiredis (Debian's 0.14); Debian's
        # libdir says /usr/lib, the files are in the multiarch dir
        dirs = [pkg_config("--variable=includedir", "hiredis")]
        dirs += [f[2:] for f in pkg_config("--cflags-only-I", "hiredis").split()]
        dirs = [d for d in dirs if d] + ["/usr/include"]
        roots = [os.path.dirname(d.rstrip("/")) if os.path.basename(d.rstrip("/")) == "hiredis" else d for d in dirs]
        root = next(r for r in roots if os.path.exists(os.path.join(r, "hiredis", "hiredis.h")) or r == "/usr/include")
        libdirs = [pkg_config("--variable=libdir", "hiredis")] + default_lib_dirs()
        yield root, [d for d in libdirs if d], "pkg-config"


def pkg_config_ok(*args):
    try:
        subprocess.run(["pkg-config", "--exists", *args], check=True, capture_output=True)
        return True
    except (OSError, subprocess.CalledProcessError):
        return False


def header_version(include_root):
    with open(os.path.join(include_root, "hiredis", "hiredis.h")) as f:
        text = f.read()
    return tuple(int(re.search(r"#define HIREDIS_%s (\d+)" % p, text).group(1)) for p in ("MAJOR", "MINOR", "PATCH"))


def find_openssl():
    """(include dirs, library dirs) for OpenSSL, or None without its headers."""
    if pkg_config_ok("openssl"):
        inc = [f[2:] for f in pkg_config("--cflags-only-I", "openssl").split()]
        lib = [f[2:] for f in pkg_config("--libs-only-L", "openssl").split()]
        if any(os.path.exists(os.path.join(d, "openssl", "ssl.h")) for d in inc + ["/usr/include", "/usr/local/include"]):
            return inc, lib
    for root in ("/usr", "/usr/local", "/opt/homebrew/opt/openssl", "/usr/local/opt/openssl"):
        if os.path.exists(os.path.join(root, "include", "openssl", "ssl.h")):
            return ([], []) if root in ("/usr", "/usr/local") else ([root + "/include"], [root + "/lib"])
    return None


def find_hiredis():
    """What the extension needs from hiredis: static archives (hiredis_ssl's
    before hiredis's) or, where there are none, -lhiredis; TLS (RL_HAVE_TLS)
    with hiredis >= 1.0, hiredis_ssl and OpenSSL's headers unless RL_TLS=0."""
    for include_root, libdirs, origin in hiredis_candidates():
        if not os.path.exists(os.path.join(include_root, "hiredis", "hiredis.h")):
            continue
        version = header_version(include_root)
        cfg = {"include_dirs": [], "library_dirs": [], "libraries": [], "extra_objects": [], "define_macros": []}
        if include_root != "/usr/include":
            cfg["include_dirs"].append(include_root)
        archive = os.environ.get("HIREDIS_STATIC_LIB") if origin == "pkg-config" else None
        libdir = os.path.dirname(archive) if archive else None
        if not archive:
            libdir = next((d for d in libdirs if os.path.exists(os.path.join(d, "libhiredis.a"))), None)
            archive = libdir and os.path.join(libdir, "libhiredis.a")
        if archive:
            cfg["extra_objects"].append(archive)
            link = "static"
        else:  # no archive (Fedora): the shared library
            libdir = next((d for d in libdirs if glob.glob(os.path.join(d, "libhiredis.*"))), None)
            if not libdir:
                continue
            cfg["library_dirs"].append(libdir)
            cfg["libraries"].append("hiredis")
            link = "shared"
        tls = "no TLS"
        ssl_archive = os.path.join(libdir, "libhiredis_ssl.a")
        if env_off("RL_TLS"):
            tls = "no TLS (RL_TLS=0)"
        elif version < (1, 0, 0):
            tls = "no TLS (hiredis < 1.0)"
        elif not os.path.exists(os.path.join(include_root, "hiredis", "hiredis_ssl.h")):
            tls = "no TLS (no hiredis_ssl)"
        elif link == "static" and not os.path.exists(ssl_archive):
            tls = "no TLS (no libhiredis_ssl.a)"
        elif link == "shared" and not glob.glob(os.path.join(libdir, "libhiredis_ssl.*")):
            tls = "no TLS (no libhiredis_ssl)"
        else:
            openssl = find_openssl()
            if openssl is None:
                tls = "no TLS (no OpenSSL headers: libssl-dev / openssl-devel)"
            else:
                tls = "TLS"
                cfg["define_macros"].append(("RL_HAVE_TLS", "1"))
                if link == "static":
                    cfg["extra_objects"].insert(0, ssl_archive)
                else:
                    cfg["libraries"].insert(0, "hiredis_ssl")
                cfg["include_dirs"] += openssl[0]
                cfg["library_dirs"] += openssl[1]
                cfg["libraries"] += ["ssl", "crypto"]
        found = "hiredis %s from %s (%s), %s" % (".".join(map(str, version)), origin, link, tls)
        if tls.startswith("no TLS") and not env_off("RL_TLS"):
            # pip shows a build's output only when it fails: a warning would go
            # unseen, and rediss:// would fail much later, far from the cause
            sys.exit("ratelimit: " + found + ", so rediss:// URLs would not work. " + TLS_HINT)
        print("ratelimit: " + found)
        return cfg
    sys.exit("ratelimit: hiredis not found; " + INSTALL_HINT)


class BuildExt(build_ext):
    """Generates rl_scripts.c from lua/ with the same CMake script the C build
    uses (the scripts are embedded byte for byte), then compiles."""

    def build_extensions(self):
        hiredis = find_hiredis()  # first: without hiredis, stop before compiling anything
        gen = os.path.abspath(os.path.join(self.build_temp, "generated"))
        os.makedirs(gen, exist_ok=True)
        cmake = shutil.which("cmake")
        if not cmake:
            sys.exit("ratelimit: cmake is needed to embed the Lua scripts (apt-get install cmake)")
        subprocess.check_call([cmake, "-DLUA_DIR=" + os.path.join(ROOT, "lua"), "-DOUT_DIR=" + gen,
                               "-P", os.path.join(ROOT, "cmake", "embed_lua.cmake")])
        # only PyInit__ratelimit leaves the shared object: not the core's
        # rl_* nor the static hiredis (which may clash with another copy);
        # Apple's linker has no version scripts
        if sys.platform == "darwin":
            exports = "-Wl,-exported_symbol,_PyInit__ratelimit"
        else:
            version_script = os.path.join(gen, "exports.map")
            with open(version_script, "w") as f:
                f.write("{ global: PyInit__ratelimit; local: *; };\n")
            exports = "-Wl,--version-script=" + version_script
        # build/python is reused between builds: a different hiredis or TLS
        # choice must rebuild the extension, not reuse the last one
        stamp = os.path.join(gen, "hiredis.txt")
        choice = repr(sorted(hiredis.items())) + "\n"
        old = ""
        if os.path.exists(stamp):
            with open(stamp) as f:
                old = f.read()
        if old != choice:
            with open(stamp, "w") as f:
                f.write(choice)
        for ext in self.extensions:
            ext.sources.append(os.path.join(gen, "rl_scripts.c"))
            ext.include_dirs.append(gen)
            # the chosen hiredis's include root first: <hiredis/hiredis.h> must
            # not be another copy in /usr/include
            ext.include_dirs[:0] = hiredis["include_dirs"]
            for key in ("library_dirs", "libraries", "extra_objects", "define_macros"):
                getattr(ext, key).extend(hiredis[key])
            ext.extra_link_args.append(exports)
            ext.depends += [stamp] + hiredis["extra_objects"]
        super().build_extensions()


sources = sorted(os.path.relpath(p, ROOT) for pattern in ("bindings/python/src/*.c", "core/src/*.c")
                 for p in glob.glob(os.path.join(ROOT, pattern)))

extension = Extension(
    "ratelimit._ratelimit",
    sources=sources,
    include_dirs=["core/include", "core/src"],
    define_macros=[("RL_API", "")],  # the core's rl_ API stays inside (ratelimit.h)
    depends=glob.glob("core/include/*.h") + glob.glob("core/src/*.h") + glob.glob("bindings/python/src/*.h")
    + glob.glob("lua/**/*.lua", recursive=True),
    extra_compile_args=["-std=gnu11", "-fvisibility=hidden", "-pthread", "-Wall", "-Wno-unused-parameter",
                        "-Werror=implicit-function-declaration"],
    extra_link_args=["-pthread"],
)

setup(
    version=core_version(),
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExt},
    # keep setuptools' build tree apart from the CMake one in build/
    options={"build": {"build_base": "build/python"}},
)
