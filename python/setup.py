"""Builds `import ftl` against libftl: this checkout's static library (make; FTL_BUILD names another
build folder), or else an installed libftl found by pkg-config. Offline, with Debian's setuptools:
    pip install --no-build-isolation --no-index ./python
"""
import os
import re
import shlex
import subprocess

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
build = os.environ.get("FTL_BUILD", os.path.join(root, "build"))


def version():
    header = open(os.path.join(root, "include", "ftl", "base.h")).read()
    return re.search(r'#define FTL_VERSION "([^"]+)"', header).group(1)


def private_libs(pc):
    """The libraries libftl.a needs, from the ftl.pc `make` writes beside it."""
    for line in open(pc):
        if line.startswith("Libs.private:"):
            return shlex.split(line.split(":", 1)[1])
    return []


if os.path.exists(os.path.join(build, "libftl.a")):
    pc = os.path.join(build, "ftl.pc")
    if not os.path.exists(pc):
        subprocess.check_call(["make", "-C", root, "--no-print-directory", "BUILD=" + build, pc])
    include_dirs = [os.path.join(root, "include")]
    extra_objects = [os.path.join(build, "libftl.a")]
    link_args = private_libs(pc)
else:  # an installed libftl
    try:
        flags = subprocess.check_output(["pkg-config", "--cflags", "--static", "--libs", "ftl"], text=True).split()
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("ftl's Python package needs libftl: run `make` in the checkout (or set FTL_BUILD to its build "
                         "folder), or install it (`make install`) where pkg-config finds ftl.pc")
    include_dirs = [f[2:] for f in flags if f.startswith("-I")]
    extra_objects = []
    link_args = [f for f in flags if not f.startswith("-I")]

setup(
    name="ftl",
    version=version(),
    description="fast transfer learning: embed, train and predict with libftl from Python",
    packages=["ftl"],
    ext_modules=[Extension("ftl._ftl", ["ftl/_ftl.c"], include_dirs=include_dirs, extra_objects=extra_objects,
                           extra_link_args=link_args, extra_compile_args=["-std=c17", "-Wall", "-Wextra"])],
    python_requires=">=3.9",
    install_requires=["numpy"],
)
