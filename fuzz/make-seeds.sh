#!/bin/sh
# Regenerate the fuzz targets' seed corpora, fuzz/corpus/<target>/, from
# real files: slices of Fashion-MNIST (IDX), CIFAR-10 records and small
# images made from its pictures (fuzz/seedgen.c), stores written by
# `singletrain pack`, snapshots written by training fuzz/tiny.cfg on
# synthetic data and .weights files written by `singletrain export`, the
# repository's .cfg files and the ONNX models of tests/lib/onnx_models.py.
# Each seed is a few KB at most. Inputs of several files (IDX images +
# labels, a store's index + stripes) are joined with the separator of
# fuzz/fuzz_files.h.
# usage: sh fuzz/make-seeds.sh [BUILD_DIR]   (default build; it must hold
#        singletrain and tools/make_images: make BUILD=DIR DIR/singletrain
#        DIR/tools/make_images)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
st=$(pwd)/$build/singletrain
make_images=$(pwd)/$build/tools/make_images
fmnist=/usr/share/datasets/fashion-mnist
images=$fmnist/t10k-images-idx3-ubyte.gz
labels=$fmnist/t10k-labels-idx1-ubyte.gz
for f in "$st" "$make_images"; do
    [ -x "$f" ] || { echo "make-seeds.sh: $f is missing: build it first" >&2; exit 2; }
done
[ -r "$images" ] || { echo "make-seeds.sh: $images is missing: run scripts/deps.sh" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/make-seeds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
corpus=fuzz/corpus
rm -rf "$corpus"
for t in cfg idx cifar store snapshot weights image onnx; do
    mkdir -p "$corpus/$t"
done
sep() { printf '\n==fuzz-next-file==\n'; }

cc -O2 -o "$tmp/seedgen" fuzz/seedgen.c -lstb -lz

# ---- cfg: the repository's network cfgs, the fuzz network, a data file
cp data/*.cfg "$corpus/cfg/"
for f in tests/fixtures/anchors/*.cfg; do
    cp "$f" "$corpus/cfg/anchor-$(basename "$f")"
    chmod 644 "$corpus/cfg/anchor-$(basename "$f")"
done
cp fuzz/tiny.cfg "$corpus/cfg/tiny.cfg"
cat >"$corpus/cfg/fmnist.data" <<'EOF'
classes=10
train=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
train_labels=/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz
test=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
test_labels=/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz
names=data/fashion.names
backup=backup/
EOF

# ---- idx: the first N test images and labels, plain and gzip-compressed.
# idx_slice FILE HEADER_BYTES RECORD_BYTES N MAGIC: the slice, its count
# patched in the header.
idx_slice() {
    gzip -dc "$1" | head -c $(($2 + $3 * $4)) >"$tmp/whole"
    printf "$5\\000\\000\\000$(printf '\\%03o' "$4")" >"$tmp/slice"
    tail -c +9 "$tmp/whole" >>"$tmp/slice"
    cat "$tmp/slice"
}
idx_slice "$images" 16 784 3 '\000\000\010\003' >"$tmp/img3"
idx_slice "$labels" 8 1 3 '\000\000\010\001' >"$tmp/lab3"
{ cat "$tmp/img3"; sep; cat "$tmp/lab3"; } >"$corpus/idx/three-plain"
gzip -9n -c "$tmp/img3" >"$tmp/img3.gz"
gzip -9n -c "$tmp/lab3" >"$tmp/lab3.gz"
{ cat "$tmp/img3.gz"; sep; cat "$tmp/lab3.gz"; } >"$corpus/idx/three-gzip"
{ cat "$tmp/img3"; sep; cat "$tmp/lab3.gz"; } >"$corpus/idx/plain-images-gzip-labels"

# ---- cifar: two records and one
"$tmp/seedgen" cifar "$images" "$labels" 2 "$corpus/cifar/two-records.bin"
"$tmp/seedgen" cifar "$images" "$labels" 1 "$corpus/cifar/one-record.bin"

# ---- store: index, then the stripes in order
# store_seed OUT SRC PACK_OPTIONS...: pack SRC and join the files into OUT.
store_seed() {
    out=$1
    shift
    rm -f "$tmp/store" "$tmp"/store.*
    "$st" pack "$@" "$tmp/store" -q --io-threads 1
    {
        cat "$tmp/store"
        for s in "$tmp"/store.*.*; do
            sep
            cat "$s"
        done
    } >"$out"
}
store_seed "$corpus/store/idx-5-records-3-stripes" "$images" --labels "$labels" --limit 5 \
    --stripes 3 --stripe-unit 1600
"$make_images" "$images" "$labels" "$tmp/pics" 10 4 rgb >/dev/null
store_seed "$corpus/store/images-10-records-4-stripes" "$tmp/pics/list.txt" \
    --names "$tmp/pics/names.txt" --classes 10 --image-size 4,4 --stripes 4 --stripe-unit 120
store_seed "$corpus/store/idx-2-records-1-stripe" "$images" --labels "$labels" --limit 2 \
    --stripes 1

# ---- snapshot: fuzz/tiny.cfg after a few iterations of momentum SGD and
# of Adam, and untrained (learning rate 0: the weights of the .weights seeds)
train() {
    mkdir -p "$tmp/$1"
    (cd "$tmp/$1" && "$st" --data synthetic --train-images 16 --test-images 8 --iters "$2" \
        --snapshot-dir . -t 1 -q --seed 3 tiny.cfg)
}
mkdir -p "$tmp/sgd" "$tmp/adam" "$tmp/lr0"
cp fuzz/tiny.cfg "$tmp/sgd/tiny.cfg"
sed 's/^momentum=.*/adam=1/' fuzz/tiny.cfg >"$tmp/adam/tiny.cfg"
sed 's/^learning_rate=.*/learning_rate=0/' fuzz/tiny.cfg >"$tmp/lr0/tiny.cfg"
train sgd 3
train adam 3
train lr0 1
cp "$tmp/sgd/tiny_final.snap" "$corpus/snapshot/momentum-3-iterations.snap"
cp "$tmp/adam/tiny_final.snap" "$corpus/snapshot/adam-3-iterations.snap"
cp "$tmp/lr0/tiny_final.snap" "$corpus/snapshot/untrained.snap"

# ---- weights: Darknet's layout (0.2.0, 64-bit seen), the old one (0.1.0,
# 32-bit seen), a transposed one (minor 1001: connected weights [in][out]),
# and a snapshot (the same readers dispatch on its magic)
"$st" export fuzz/tiny.cfg "$tmp/lr0/tiny_final.snap" "$tmp/tiny.weights" -q
cp "$tmp/tiny.weights" "$corpus/weights/darknet-0.2.0.weights"
{ printf '\000\000\000\000\001\000\000\000\000\000\000\000\004\000\000\000'
  tail -c +21 "$tmp/tiny.weights"; } >"$corpus/weights/darknet-0.1.0-seen32.weights"
{ printf '\000\000\000\000\351\003\000\000\000\000\000\000\004\000\000\000'
  tail -c +21 "$tmp/tiny.weights"; } >"$corpus/weights/transposed-0.1001.0.weights"
cp "$tmp/lr0/tiny_final.snap" "$corpus/weights/snapshot.snap"

# ---- image: one Fashion-MNIST picture, 12 x 12, in every format we can
# write, and a 1 x 1 GIF (stb_image reads GIF; nothing here writes it)
mkdir -p "$tmp/img"
"$tmp/seedgen" images "$images" 0 12 "$tmp/img"
cp "$tmp/img"/* "$corpus/image/"
printf 'GIF89a\001\000\001\000\200\000\000\377\377\377\000\000\000!\371\004\001\000\000\000\000,\000\000\000\000\001\000\001\000\000\002\002D\001\000;' \
    >"$corpus/image/one-pixel.gif"

# ---- onnx: the small models of tests/lib/onnx_models.py (Debian's
# python3-onnx), good and bad (the LeNet-like one is too large for a seed)
printf '[net]\nbatch=8\n' >"$tmp/lenet.train"
/usr/bin/python3 tests/lib/onnx_models.py "$tmp"
for m in mixed global unsupported bad_attr not_last no_init; do
    cp "$tmp/$m.onnx" "$corpus/onnx/"
done

for t in cfg idx cifar store snapshot weights image onnx; do
    printf '%-9s %2d seeds, %6d bytes\n' "$t" "$(ls "$corpus/$t" | wc -l)" \
        "$(cat "$corpus/$t"/* | wc -c)"
done
