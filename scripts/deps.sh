#!/usr/bin/env bash
# Make sure the Debian packages a make target needs are present.
#   scripts/deps.sh TARGET     TARGET: build | test | asan | neon | fuzz | demo
# As root, missing packages are installed with apt-get; otherwise the script
# names them and stops (or, for optional ones, says what will be skipped).
set -u
target=${1:-build}
need=()      # "command package" pairs that the target cannot do without
optional=()  # pairs whose absence only skips a part

case $target in
build | demo) need=("cc gcc" "make make" "/usr/include/cjson/cJSON.h libcjson-dev" "/usr/include/microhttpd.h libmicrohttpd-dev")
      optional=("/usr/include/liburing.h liburing-dev") ;;
asan) need=("cc gcc" "make make" "/usr/include/cjson/cJSON.h libcjson-dev" "/usr/include/microhttpd.h libmicrohttpd-dev")
      optional=("/usr/include/liburing.h liburing-dev" "node nodejs" "npm npm" "chromium chromium") ;;
test) need=("cc gcc" "make make" "/usr/include/cjson/cJSON.h libcjson-dev" "/usr/include/microhttpd.h libmicrohttpd-dev")
      optional=("/usr/include/liburing.h liburing-dev" "aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu" "qemu-aarch64 qemu-user"
                "pkg-config pkgconf" "g++ g++" "node nodejs" "npm npm" "chromium chromium") ;;
neon) need=("aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu" "qemu-aarch64 qemu-user") ;;
fuzz) need=("clang clang" "/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a libclang-rt-14-dev") ;;
*) echo "deps.sh: unknown target '$target'" >&2; exit 2 ;;
esac

have() { case $1 in /*) [ -e "$1" ] ;; *) command -v "$1" >/dev/null 2>&1 ;; esac; }

# The server's tests drive it with npm packages (tests/serve/package.json,
# pinned by its package-lock.json): installed from the npm registry once.
npm_packages() {
    case $target in test | asan) ;; *) return 0 ;; esac
    [ -e tests/serve/node_modules/.package-lock.json ] && return 0
    command -v npm >/dev/null 2>&1 || return 0
    echo "deps: installing the server tests' npm packages (npm ci in tests/serve)"
    npm ci --prefix tests/serve --no-audit --no-fund --loglevel=error >/tmp/pinfer-npm.log 2>&1 ||
        echo "deps: npm ci failed (log: /tmp/pinfer-npm.log); the server's client tests are skipped" >&2
}
trap npm_packages EXIT

missing=(); missing_opt=()
for p in "${need[@]}"; do set -- $p; have "$1" || missing+=("$2"); done
for p in ${optional[@]+"${optional[@]}"}; do set -- $p; have "$1" || missing_opt+=("$2"); done
[ ${#missing[@]} -eq 0 ] && [ ${#missing_opt[@]} -eq 0 ] && exit 0

all=(${missing[@]+"${missing[@]}"} ${missing_opt[@]+"${missing_opt[@]}"})
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "deps: installing ${all[*]} (Debian packages)"
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${all[@]}" >/tmp/pinfer-apt.log 2>&1 ||
       { apt-get update -qq >>/tmp/pinfer-apt.log 2>&1 &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${all[@]}" >>/tmp/pinfer-apt.log 2>&1; }; then
        exit 0
    fi
    echo "deps: apt-get failed (log: /tmp/pinfer-apt.log)" >&2
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: 'make $target' needs these Debian packages: ${missing[*]}" >&2
    echo "deps: install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "deps: optional packages missing: ${missing_opt[*]} (sudo apt-get install ${missing_opt[*]}); their tests are skipped" >&2
case " ${missing_opt[*]} " in *" liburing-dev "*) echo "deps: without liburing-dev the I/O engine reads with pread threads, not io_uring" >&2 ;; esac
exit 0
