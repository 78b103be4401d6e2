#!/bin/sh
# Time to accuracy against PyTorch (a benchmark, not a test): each model is
# built in PyTorch, exported freshly initialised to ONNX, and trained from
# those same initial weights by PyTorch and by singletrain with the same
# recipe (a [net] file: batch, SGD with momentum and weight decay, the
# learning-rate schedule and its warm-up, the augmentation), the same
# epochs of Fashion-MNIST and the same threads, once per seed; PyTorch and
# singletrain alternate which runs first. Test accuracy (eval mode: batch
# norm's running statistics) after every epoch goes into a CSV,
#   framework,model,seed,epoch,seconds,test_acc
# (framework pytorch or singletrain, seconds the training time since the
# first batch, test passes left out on both sides, test_acc in percent).
# At the end, per model: each framework's final accuracy (mean and spread
# over the seeds) and the time to PyTorch's mean final accuracy, and with
# --plots DIR one gnuplot figure per model (accuracy against epoch and
# against seconds, both frameworks, every seed).
# scripts/accuracy_zoo.py has the zoo, the export, PyTorch's training and
# the recipe's translation (scripts/torch_recipe.py); docs/guide/accuracy.md
# the figures of a run.
# usage: scripts/bench-accuracy.sh [--model ZOO_NAME | --model FILE.py:FUNCTION]...
#            [--recipe FILE.train] [--epochs N] [--seeds N] [--threads N]
#            [--csv OUT.csv] [--plots DIR]
#   --model     a zoo model (lenet, vgg, resnet; default all three) or a
#               FILE.py whose FUNCTION returns a freshly initialised
#               torch.nn.Module from 1x28x28 images to 10 class scores
#               (repeatable)
#   --recipe    the [net] recipe (default data/bench/accuracy.train)
#   --epochs    epochs per run (default 3); --seeds seeds 1..N (default 3)
#   --threads   PyTorch's threads and singletrain's -t (default: the cores)
#   --csv       the CSV (default bench-accuracy.csv), written as OUT.partial
#               and renamed when every run is done
# environment: SINGLETRAIN (default build/singletrain), ST_ARGS (more
#   singletrain options)
# Exit status: 0 done and every model within the issue's bounds (0.3 points
# or PyTorch's seed spread, 1.5x sooner), 3 done but a model outside them,
# 2 bad usage, 1 a run failed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${SINGLETRAIN:-$root/build/singletrain}
py=/usr/bin/python3
zoo=$here/accuracy_zoo.py
fmnist=/usr/share/datasets/fashion-mnist
models="" recipe=$root/data/bench/accuracy.train epochs=3 seeds=3
threads=$(nproc) csv=bench-accuracy.csv plots=""
die() { echo "bench-accuracy.sh: $*" >&2; exit 2; }
count() { case "$2" in '' | *[!0-9]* | 0*) die "$1 $2: expected a positive integer" ;; esac; }
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "$1: expected a value after it (see the usage in $0)"
    case "$1" in
    --model) models="$models $2" ;;
    --recipe) recipe=$2 ;;
    --epochs) count "$1" "$2"; epochs=$2 ;;
    --seeds) count "$1" "$2"; seeds=$2 ;;
    --threads) count "$1" "$2"; threads=$2 ;;
    --csv) csv=$2 ;;
    --plots) plots=$2 ;;
    *) die "$1: unknown option (expected --model, --recipe, --epochs, --seeds, --threads, --csv or --plots)" ;;
    esac
    shift 2
done
models=${models:-lenet vgg resnet}
[ -x "$bin" ] || die "$bin is missing: run make first (or set SINGLETRAIN)"
[ -f "$recipe" ] || die "--recipe $recipe: no such file"
$py -c 'import torch, onnx' 2>/dev/null ||
    die "PyTorch or ONNX is missing: apt-get install python3-torch python3-onnx libopenblas0-openmp"
[ -f "$fmnist/train-images-idx3-ubyte.gz" ] || die "no Fashion-MNIST in $fmnist: run make run first"
if [ -n "$plots" ]; then
    command -v gnuplot >/dev/null 2>&1 || die "--plots: gnuplot is not installed (gnuplot-nox)"
    mkdir -p "$plots"
fi
for m in $models; do
    case "$m" in
    *.py:*) [ -f "${m%:*}" ] || die "--model $m: no such file ${m%:*}" ;;
    lenet | vgg | resnet) ;;
    *) die "--model $m: expected lenet, vgg, resnet or FILE.py:FUNCTION" ;;
    esac
done
batch=$($py "$zoo" check "$recipe") || exit 2
per_epoch=$(((60000 + batch - 1) / batch))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
recipe=$(cd "$(dirname "$recipe")" && pwd)/$(basename "$recipe")
{ printf 'classes=10\ntrain=%s/train-images-idx3-ubyte.gz\n' "$fmnist"
  printf 'train_labels=%s/train-labels-idx1-ubyte.gz\n' "$fmnist"
  printf 'test=%s/t10k-images-idx3-ubyte.gz\ntest_labels=%s/t10k-labels-idx1-ubyte.gz\n' \
      "$fmnist" "$fmnist"
} >"$work/fmnist.data"
echo "framework,model,seed,epoch,seconds,test_acc" >"$csv.partial"
echo "bench-accuracy.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads, $epochs epochs, seeds 1-$seeds, recipe $recipe"

# singletrain's --metrics rows as CSV rows: per test row, the seconds of
# training until it (the train row logged at the same iteration, every
# epoch's last, less the test phases before it)
st_rows() { # NAME SEED METRICS
    awk -F, -v name="$1" -v seed="$2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == "train" { train[$2] = $(col["wall_s"]) }
        $1 == "test" && !($2 in done) {
            done[$2] = 1; epoch++
            printf "singletrain,%s,%s,%d,%.3f,%.2f\n", name, seed, epoch,
                train[$2] - tested, 100 * $(col["test_accuracy"])
            tested += $(col["wall_s"]) - train[$2]
        }' "$3"
}

for m in $models; do
    name=$(basename "${m%:*}" .py)
    [ "$name" = "${m%:*}" ] || name=$name-${m#*:}
    s=1
    while [ "$s" -le "$seeds" ]; do
        stem=$work/$name-$s
        $py "$zoo" export "$m" "$s" "$stem" || { echo "bench-accuracy.sh: exporting $m failed" >&2; exit 1; }
        order="pytorch singletrain"
        [ $((s % 2)) -eq 1 ] || order="singletrain pytorch"
        for fw in $order; do
            start=$(date +%s.%N)
            if [ "$fw" = pytorch ]; then
                $py -W ignore "$zoo" train "$m" "$s" "$stem" "$recipe" "$epochs" "$threads" \
                    "$name" >"$stem.torch" || { echo "bench-accuracy.sh: PyTorch on $name seed $s failed" >&2; exit 1; }
                rows=$(cat "$stem.torch")
            else
                # shellcheck disable=SC2086
                "$bin" -q --hparams "$recipe" --data "$work/fmnist.data" --epochs "$epochs" \
                    -t "$threads" --seed "$s" --log-every "$per_epoch" --metrics "$stem.metrics" \
                    ${ST_ARGS:-} "$stem.onnx" || { echo "bench-accuracy.sh: singletrain on $name seed $s failed" >&2; exit 1; }
                rows=$(st_rows "$name" "$s" "$stem.metrics")
            fi
            echo "$rows" >>"$csv.partial"
            echo "$rows" | tail -1 | awk -F, -v t0="$start" -v t1="$(date +%s.%N)" \
                '{ printf "  %-11s %s seed %s: %s%% after epoch %s, %.1f s training (%.1f s the process)\n",
                   $1, $2, $3, $6, $4, $5, t1 - t0 }'
        done
        s=$((s + 1))
    done
done
mv "$csv.partial" "$csv"
echo "bench-accuracy.sh: wrote $csv"
status=0
$py "$zoo" summary "$csv" || status=3
[ -z "$plots" ] && exit $status
for m in $models; do
    name=$(basename "${m%:*}" .py)
    [ "$name" = "${m%:*}" ] || name=$name-${m#*:}
    for fw in pytorch singletrain; do
        awk -F, -v n="$name" -v f="$fw" '$1 == f && $2 == n {
            if ($3 != s && s != "") print "\n"; s = $3; print $4, $5, $6 }' "$csv" >"$work/$name.$fw"
    done
    gnuplot <<EOF || { echo "bench-accuracy.sh: gnuplot failed on $name" >&2; exit 1; }
set terminal png noenhanced size 1100,420
set output "$plots/accuracy_$name.png"
set multiplot layout 1,2 title "$name on Fashion-MNIST: test accuracy, $threads threads, seeds 1-$seeds"
set grid
set key bottom right
set ylabel "test accuracy (%)"
set xlabel "epoch"
plot "$work/$name.pytorch" using 1:3 with linespoints lc rgb "#c03030" title "PyTorch", \
     "$work/$name.singletrain" using 1:3 with linespoints lc rgb "#3050c0" title "singletrain"
set xlabel "seconds of training"
plot "$work/$name.pytorch" using 2:3 with linespoints lc rgb "#c03030" title "PyTorch", \
     "$work/$name.singletrain" using 2:3 with linespoints lc rgb "#3050c0" title "singletrain"
unset multiplot
EOF
    echo "bench-accuracy.sh: wrote $plots/accuracy_$name.png"
done
exit $status
