#!/usr/bin/env bash
# Makes ROOT a root file system holding only Debian's Python 3.11 (the interpreter, its standard
# library and the libraries the two load), glibc, and the C++ runtime (libstdc++, libgcc_s):
# no shell, no compiler, no -dev package, no other library. /dev holds fresh nodes; /proc, /sys
# and /wheelhouse are mount points for the caller's private mount namespace.
#   make_bare_root.sh ROOT
set -euo pipefail
root=$1
lib=$root/usr/lib/x86_64-linux-gnu
mkdir -p "$root"/{usr/bin,lib64,proc,sys,dev/shm,tmp,etc,wheelhouse} "$lib"
ln -s usr/lib "$root/lib"
ln -s usr/bin "$root/bin"
cp -L /usr/bin/python3.11 "$root/usr/bin/"
ln -s python3.11 "$root/usr/bin/python3"
cp -a /usr/lib/python3.11 "$root/usr/lib/"
cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
# What the interpreter and its extension modules load, and the C/C++ runtime.
for f in /usr/bin/python3.11 /usr/lib/python3.11/lib-dynload/*.so; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r path; do
  cp -L "$path" "$lib/"
done
# glibc: every library of Debian's libc6 (libc, libm, libpthread, libdl, librt, ld.so, ...).
dpkg -L libc6 | grep -E '^/(usr/)?lib/x86_64-linux-gnu/[^/]*\.so[.0-9]*$' | while read -r path; do
  cp -L "$path" "$lib/"
done
cp -L /lib/x86_64-linux-gnu/libstdc++.so.6 /lib/x86_64-linux-gnu/libgcc_s.so.1 "$lib/"
cp /etc/hosts /etc/passwd /etc/group "$root/etc/"
mknod -m 666 "$root/dev/null" c 1 3
mknod -m 666 "$root/dev/zero" c 1 5
mknod -m 666 "$root/dev/urandom" c 1 9
mknod -m 666 "$root/dev/random" c 1 8
chmod 1777 "$root/tmp" "$root/dev/shm"
