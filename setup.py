"""Builds ratelimit._ratelimit: the C core, the embedded Lua scripts and the
CPython extension in one shared object, with hiredis linked statically."""
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


def find_static_hiredis():
    """libhiredis.a: $HIREDIS_STATIC_LIB, else pkg-config's libdir, else the
    usual (multiarch) library directories. Debian's hiredis.pc says /usr/lib
    while the archive lives in /usr/lib/<multiarch>, hence the fallbacks."""
    explicit = os.environ.get("HIREDIS_STATIC_LIB")
    if explicit:
        return explicit
    dirs = []
    libdir = pkg_config("--variable=libdir", "hiredis")
    if libdir:
        dirs.append(libdir)
    multiarch = ""
    try:
        multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    if multiarch:
        dirs += ["/usr/lib/" + multiarch, "/usr/local/lib/" + multiarch]
    dirs += ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/local/lib", "/usr/lib64", "/usr/lib"]
    for d in dirs:
        path = os.path.join(d, "libhiredis.a")
        if os.path.exists(path):
            return path
    sys.exit("ratelimit: libhiredis.a not found (install libhiredis-dev, or set HIREDIS_STATIC_LIB)")


class BuildExt(build_ext):
    """Generates rl_scripts.c from lua/ with the same CMake script the C build
    uses (the scripts are embedded byte for byte), then compiles."""

    def build_extensions(self):
        gen = os.path.abspath(os.path.join(self.build_temp, "generated"))
        os.makedirs(gen, exist_ok=True)
        cmake = shutil.which("cmake")
        if not cmake:
            sys.exit("ratelimit: cmake is needed to embed the Lua scripts (apt-get install cmake)")
        subprocess.check_call([cmake, "-DLUA_DIR=" + os.path.join(ROOT, "lua"), "-DOUT_DIR=" + gen,
                               "-P", os.path.join(ROOT, "cmake", "embed_lua.cmake")])
        # only PyInit__ratelimit leaves the shared object: not the core's
        # rl_* nor the static hiredis (which may clash with another copy)
        version_script = os.path.join(gen, "exports.map")
        with open(version_script, "w") as f:
            f.write("{ global: PyInit__ratelimit; local: *; };\n")
        hiredis = find_static_hiredis()
        for ext in self.extensions:
            ext.sources.append(os.path.join(gen, "rl_scripts.c"))
            ext.include_dirs.append(gen)
            ext.extra_objects.append(hiredis)
            ext.extra_link_args.append("-Wl,--version-script=" + version_script)
        super().build_extensions()


sources = ["bindings/python/src/_ratelimit.c"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "core", "src", "*.c")))

extension = Extension(
    "ratelimit._ratelimit",
    sources=sources,
    include_dirs=["core/include", "core/src"],
    depends=glob.glob("core/include/*.h") + glob.glob("core/src/*.h") + glob.glob("lua/*.lua"),
    extra_compile_args=["-std=gnu11", "-fvisibility=hidden", "-pthread", "-Wall", "-Wno-unused-parameter"],
    extra_link_args=["-pthread"],
)

setup(
    version=core_version(),
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExt},
    # keep setuptools' build tree apart from the CMake one in build/
    options={"build": {"build_base": "build/python"}},
)
