#!/usr/bin/env bash
# run.sh — the install test (ctest test `install`).
#
#   tests/install/run.sh --build-dir <cmake build dir> [--cmake cmake] [--cc cc] [--config C]
#                        [--cli ON|OFF]
#
# 1. `cmake --install` the build into a temporary prefix and checks what landed there;
# 2. builds project/main.c with `pkg-config --cflags --libs atoll` (PKG_CONFIG_PATH = prefix);
# 3. builds project/ with CMake and find_package(Atoll) (CMAKE_PREFIX_PATH = prefix);
# 4. runs both programs without LD_LIBRARY_PATH, and checks that they loaded libatoll.so.0
#    from the prefix;
# 5. with --cli ON (the build's ATOLL_BUILD_CLI), runs the installed bin/atoll on the realm the
#    first program wrote.
set -euo pipefail

build_dir=""
cmake=cmake
cc=cc
config=""
cli=OFF
while [[ $# -gt 0 ]]; do
    case $1 in
        --build-dir) build_dir=$2; shift 2 ;;
        --cmake) cmake=$2; shift 2 ;;
        --cc) cc=$2; shift 2 ;;
        --config) config=$2; shift 2 ;;
        --cli) cli=$2; shift 2 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ -n $build_dir ]] || { echo "run.sh: --build-dir is required" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
header=$here/../../include/atoll.h
tmp=$(mktemp -d "${TMPDIR:-/tmp}/atoll-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
failures=0

step() { printf '\n== %s\n' "$*"; }
ok() { printf '   ok   %s\n' "$*"; }
bad() { printf '   FAIL %s\n' "$*"; failures=$((failures + 1)); }

step "cmake --install into $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" ${config:+--config "$config"}

step "installed files"
libdir=$(dirname "$(find "$prefix" -name libatoll.so.0 -print -quit)")
[[ -f $libdir/libatoll.so.0 && ! -L $libdir/libatoll.so.0 ]] && ok "$libdir/libatoll.so.0" || bad "no lib*/libatoll.so.0 file"
[[ -L $libdir/libatoll.so && $(readlink "$libdir/libatoll.so") == libatoll.so.0 ]] \
    && ok "libatoll.so -> libatoll.so.0" || bad "libatoll.so is not a symlink to libatoll.so.0"
for f in include/atoll.h "${libdir#"$prefix"/}/pkgconfig/atoll.pc" \
         "${libdir#"$prefix"/}/cmake/Atoll/AtollConfig.cmake" \
         "${libdir#"$prefix"/}/cmake/Atoll/AtollConfigVersion.cmake"; do
    [[ -f $prefix/$f ]] && ok "$f" || bad "missing $f"
done
cmp -s "$header" "$prefix/include/atoll.h" && ok "include/atoll.h is the source header" || bad "installed atoll.h differs"
soname=$(readelf -d "$libdir/libatoll.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libatoll.so.0 ]] && ok "SONAME $soname" || bad "SONAME is '$soname', expected libatoll.so.0"
runpath=$(readelf -d "$libdir/libatoll.so.0" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
ok "RUNPATH of the installed library: ${runpath:-none}"

version=$(sed -n 's/^#define ATOLL_VERSION "\(.*\)"/\1/p' "$header")

step "pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pc_version=$(pkg-config --modversion atoll)
[[ $pc_version == "$version" ]] && ok "pkg-config --modversion atoll = $pc_version" || bad "pkg-config version $pc_version, header $version"
flags=$(pkg-config --cflags --libs atoll)
ok "pkg-config --cflags --libs atoll: $flags"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror "$here/project/main.c" $flags -o "$tmp/outside-pkgconfig" \
    && ok "built outside-pkgconfig" || bad "could not build with pkg-config"

step "find_package(Atoll)"
"$cmake" -S "$here/project" -B "$tmp/build-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 \
    && "$cmake" --build "$tmp/build-cmake" >>"$tmp/cmake.log" 2>&1 \
    && ok "built outside (CMake)" || { cat "$tmp/cmake.log"; bad "could not build with find_package(Atoll)"; }

step "run both, without LD_LIBRARY_PATH"
for bin in "$tmp/outside-pkgconfig" "$tmp/build-cmake/outside"; do
    [[ -x $bin ]] || continue
    name=$(basename "$(dirname "$bin")")/$(basename "$bin")
    loaded=$(env -u LD_LIBRARY_PATH ldd "$bin" | awk '$1 == "libatoll.so.0" {print $3}')
    case $loaded in
        "$prefix"/*) ok "$name loads libatoll.so.0 from the prefix ($loaded)" ;;
        *) bad "$name loads libatoll.so.0 from '${loaded:-nowhere}', not from the prefix" ;;
    esac
    if env -u LD_LIBRARY_PATH "$bin" "$tmp/$(basename "$bin").realm"; then
        ok "$name ran"
    else
        bad "$name failed (exit $?)"
    fi
done

if [[ $cli == ON ]]; then
    step "bin/atoll"
    atoll=$prefix/bin/atoll
    if [[ -x $atoll && ! -L $atoll ]]; then
        ok "bin/atoll"
        got=$(env -u LD_LIBRARY_PATH "$atoll" --version) || true
        [[ $got == "atoll $version" ]] && ok "atoll --version: $got" || bad "atoll --version printed '$got', expected 'atoll $version'"
        realm=$tmp/outside-pkgconfig.realm
        if [[ -f $realm ]]; then
            env -u LD_LIBRARY_PATH "$atoll" info "$realm" >"$tmp/info.txt" \
                && ok "atoll info on the realm outside-pkgconfig wrote" || { cat "$tmp/info.txt"; bad "atoll info failed"; }
        fi
    else
        bad "no bin/atoll program"
    fi
fi

echo
if [[ $failures -eq 0 ]]; then
    echo "install test: all passed"
else
    echo "install test: $failures failed"
    exit 1
fi
