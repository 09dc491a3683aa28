# Sourced by the bundle's scripts (gpubench.sh, gpuprofile.sh) with DEV set to
# the bundle: the libraries this system lacks are linked from DEV/lib into
# /tmp/msplib, which goes first on LD_LIBRARY_PATH (the system's own stay in use).
LIBD=/tmp/msplib
rm -rf "$LIBD"; mkdir -p "$LIBD"
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
cache=$("$LDCONFIG" -p 2>/dev/null)
for f in "$DEV"/lib/*.so*; do
    so=$(basename "$f")
    case $so in libmsprobe_*) continue;; esac
    grep -q "^[[:space:]]*$so " <<< "$cache" || ln -sf "$f" "$LIBD/$so"
done
export LD_LIBRARY_PATH=$LIBD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
