# Cross build for 64-bit Arm Linux with Debian's cross compiler
# (g++-aarch64-linux-gnu) against Debian's multiarch arm64 libraries
# (libhwy-dev:arm64, libgtest-dev:arm64 ... in /usr/lib/aarch64-linux-gnu).
# Test programs run under qemu-user, so ctest and gtest_discover_tests work
# on an x86-64 machine. Used by the "arm64" preset and scripts/test-arm64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Libraries and packages: the cross C library in /usr/aarch64-linux-gnu and
# Debian's multiarch arm64 packages, whose files live under / (headers in
# /usr/include, shared by all architectures; libraries and CMake package files
# in /usr/lib/aarch64-linux-gnu, chosen by CMAKE_LIBRARY_ARCHITECTURE).
# Programs (ninja, pkg-config) come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config (PCRE2): the arm64 .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

# Run arm64 programs (tests, gtest_discover_tests) under qemu-user. They load
# the multiarch arm64 C library (libc6:arm64, /lib/ld-linux-aarch64.so.1 and
# /usr/lib/aarch64-linux-gnu), which libhwy.so and libstdc++ come with: "-L /"
# keeps qemu on the host's paths. Not "-L /usr/aarch64-linux-gnu": that
# loader (libc6-arm64-cross, another glibc build) would run with the
# multiarch libc.so.6, and the mismatch hangs pthread_create. QEMU_CPU=max
# (set by the preset) gives SVE and SVE2 so that every Highway target runs.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
