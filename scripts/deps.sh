#!/bin/sh
# Install the Debian packages singletrain needs, only those missing; quiet
# and idempotent; sudo only when not root. With --test, also those only the
# tests need (make test); without, what building and running take (make
# run, make deps).
# usage: scripts/deps.sh [--test]
set -eu
# libprotobuf-c-dev, protobuf-c-compiler, libonnx-dev: the ONNX reader and
# writer, whose schema (onnx.proto) protoc-c compiles at build time.
PKGS="gcc make libdnnl-dev libhwloc-dev libmpich-dev mpich libstb-dev zlib1g-dev dataset-fashion-mnist libprotobuf-c-dev protobuf-c-compiler libonnx-dev"
# libcmocka-dev: the C tests. darknet: the shape oracle of
# tests/e2e/test_darknet_shapes.sh and the Darknet interchange tests.
# gnuplot-nox: the figures of scripts/plot.sh. clang-14, libclang-rt-14-dev:
# libFuzzer and the sanitizers of the fuzz targets (mk/fuzz.mk,
# tests/e2e/test_fuzz.sh). groff-base: tests/e2e/test_install.sh renders
# the manual page with groff. valgrind: the leak checks of
# tests/e2e/test_memory.sh. python3-onnx: the models of tests/e2e/test_onnx.sh
# (onnx.helper, onnx.checker; /usr/bin/python3's) and test_torch.sh's reading
# of exported models. python3-torch: PyTorch, the oracle of
# tests/e2e/test_torch.sh (its models, exports, gradients and losses; apt
# brings the BLAS it needs).
TEST_PKGS="libcmocka-dev darknet groff-base gnuplot-nox clang-14 libclang-rt-14-dev valgrind python3-onnx python3-torch"
case "${1:-}" in
--test) PKGS="$PKGS $TEST_PKGS" ;;
"") ;;
*)
    echo "scripts/deps.sh: unknown argument '$1': expected --test or nothing" >&2
    exit 2
    ;;
esac
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
