"""What the build under test is, from its CMakeCache.txt (MSPROBE_BUILD_DIR,
set by ctest): a test that cannot hold under a sanitizer asks here."""
import os


def sanitized_build():
    cache = os.path.join(os.environ.get("MSPROBE_BUILD_DIR", ""), "CMakeCache.txt")
    try:
        with open(cache) as f:
            return any(line.startswith("MSPROBE_SANITIZE:BOOL=ON") for line in f)
    except OSError:
        return False
