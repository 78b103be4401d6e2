#!/bin/sh
# Figures of a scripts/sweep.sh CSV with gnuplot (Debian's gnuplot-nox), one
# set per network, as PNG files in OUTDIR:
#   speedup_NET.png     images/s at T threads over images/s at 1 thread (the
#                       fewest threads in the CSV if 1 is missing), same batch,
#                       one line per batch size (the SingleCaffe figures), of
#                       the medians and (dotted) of the fastest runs, which
#                       are the least disturbed on a shared machine;
#   throughput_NET.png  images/s against the batch size, one line per thread
#                       count, the bars from the slowest to the fastest run;
#                       (in these two, a point with runs sweep.sh marked busy
#                       is greyed out: a grey disc over it, in the key once)
#   split_NET.png       where an iteration's time goes, stacked bars per point
#                       (compute, barrier, aggregation, communication, update,
#                       data), in ms and as shares;
#   curves_NET.png      training loss and test accuracy against the iteration
#                       and against wall time, from the run logs in LOGDIR.
# A CSV of scripts/sweep.sh --preset singlecaffe (a system column) gets, by
# default, instead:
#   ratio.png           the Speed Ratio of every network, batch and solver
#                       (scripts/speed-ratio.awk: singletrain's best images/s
#                       over each baseline's best), a bar per baseline, and
#                       the line of parity;
#   scaling_NET.png     images/s against the cores (singletrain's worker
#                       threads, the baselines' processes), one line per
#                       system, a panel per solver and batch;
# and the Speed Ratio table (markdown) is printed after the medians.
# Figures are of the runs whose status is ok, medians over the repeats (awk).
# A network whose runs differ in backend (system, in a preset's CSV), solver,
# intra-op threads, ranks or iteration count gets one panel per combination
# ("configuration"). Wall time
# is the sum of the progress lines' intervals (iterations x batch / their
# img/s), so it includes the test phases and not the start-up; a test point
# is drawn at its iteration's progress line, before the test ran.
# The curves are drawn from the longest runs of each network (most
# iterations), run 1, at their largest thread count: one line per remaining
# run. Also prints the medians, speed-ups and load averages (load1) as a table.
#
# usage: scripts/plot.sh CSV [LOGDIR] OUTDIR
#   LOGDIR: the runs' logs (default: the sweep's, CSV without .csv plus -logs)
# environment: FIGURES  which figures ("speedup throughput split curves", or
#                       "ratio scaling" for a preset's CSV)
#              PLOT_SCRIPTS  a folder to keep each figure's gnuplot script
#                       in (NAME.png's as NAME.png.gp)
# Exit status: 0 done, 2 bad usage or input, 1 gnuplot failed.
set -u
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
die_usage() {
    echo "plot.sh: $*" >&2
    exit 2
}
case ${1:-} in
-h | --help)
    sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"
    exit 0
    ;;
esac
case $# in
2) csv=$1 logdir=${1%.csv}-logs outdir=$2 ;;
3) csv=$1 logdir=$2 outdir=$3 ;;
*) die_usage "usage: scripts/plot.sh CSV [LOGDIR] OUTDIR" ;;
esac
[ -r "$csv" ] || die_usage "$csv is missing or unreadable"
has_system=0
head -n 1 "$csv" | tr ',' '\n' | grep -qx system && has_system=1
if [ "$has_system" -eq 1 ]; then
    figures=${FIGURES:-ratio scaling}
else
    figures=${FIGURES:-speedup throughput split curves}
fi
for f in $figures; do
    case $f in
    speedup | throughput | split | curves) ;;
    ratio | scaling)
        [ "$has_system" -eq 1 ] || die_usage "FIGURES: $f needs the CSV of a preset \
(scripts/sweep.sh --preset singlecaffe): $csv has no column system"
        ;;
    *) die_usage "FIGURES: '$f' is not one of speedup throughput split curves ratio scaling" ;;
    esac
done
command -v gnuplot >/dev/null 2>&1 ||
    die_usage "gnuplot is not installed: scripts/deps.sh --test installs gnuplot-nox"
mkdir -p "$outdir" || die_usage "cannot create $outdir"
term="pngcairo noenhanced font 'sans,9'"
gnuplot -e "set terminal $term" 2>/dev/null || term="png noenhanced"
work=$(mktemp -d "${TMPDIR:-/tmp}/st-plot.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 130' HUP INT PIPE TERM

# Columns by name, so that added columns do not move anything.
cat >"$work/columns.awk" <<'EOF'
NR == 1 {
    for (i = 1; i <= NF; i++) col[$i] = i
    n = split("network backend threads intra ranks batch solver iters run status images_per_s " \
              "compute_ms barrier_ms aggregation_ms update_ms data_ms comm_ms log", need, " ")
    for (k = 1; k <= n; k++)
        if (!(need[k] in col)) {
            printf "plot.sh: %s: no column %s in the header (not a sweep.sh CSV?)\n", FILENAME,
                need[k] > "/dev/stderr"
            bad = 1
            exit 2
        }
    next
}
function v(name) { return $col[name] }
# sort_num A N: sort A[1..N] ascending, numerically.
function sort_num(a, n,    i, j, x) {
    for (i = 2; i <= n; i++) {
        x = a[i]
        for (j = i - 1; j >= 1 && a[j] + 0 > x + 0; j--) a[j + 1] = a[j]
        a[j + 1] = x
    }
}
# add_unique LIST TAG KEY VALUE: append VALUE to LIST[KEY] (separated by
# LSEP, "\035", first-seen order) unless it is there; TAG names LIST.
function add_unique(list, tag, key, value,    joined) {
    if ((tag, key, value) in seen_in) return
    seen_in[tag, key, value] = 1
    # (mawk creates list[key] before testing "key in list" on the right)
    if (key in list) joined = list[key] "\035" value
    else joined = value
    list[key] = joined
}
EOF

# The table of points: one line per network, configuration, batch and
# threads with the medians over the repeats; and per network a label for
# each configuration naming only what varies.
cat >"$work/points.awk" <<'EOF'
NR > 1 && v("status") == "ok" {
    net = v("network")
    cfg = (("system" in col) ? v("system") : v("backend")) SUBSEP v("solver") SUBSEP v("intra") \
        SUBSEP v("ranks") SUBSEP v("iters")
    add_unique(nets, "n", "all", net)
    add_unique(cfgs, "c", net, cfg)
    add_unique(batches, "b", net SUBSEP cfg, v("batch"))
    add_unique(threads, "t", net SUBSEP cfg, v("threads"))
    split(cfg, parts, SUBSEP)
    for (d = 1; d <= 5; d++) add_unique(dimvals, "d", net SUBSEP d, parts[d])
    g = net SUBSEP cfg SUBSEP v("batch") SUBSEP v("threads")
    k = ++runs[g]
    val[g, "ips", k] = v("images_per_s")
    val[g, "compute", k] = v("compute_ms")
    val[g, "barrier", k] = v("barrier_ms")
    # communication across nodes is not a part of aggregation: a part of its own
    val[g, "aggregation", k] = v("aggregation_ms")
    val[g, "comm", k] = v("comm_ms")
    val[g, "update", k] = v("update_ms")
    val[g, "data", k] = v("data_ms")
    val[g, "load", k] = ("load1" in col) && v("load1") != "" ? v("load1") : -1
    if (("busy" in col) && v("busy") != "") { known[g]++; if (v("busy") == "yes") busy[g]++ }
}
function median(g, f,    i, n, a) {
    n = runs[g]
    for (i = 1; i <= n; i++) a[i] = val[g, f, i]
    sort_num(a, n)
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function extreme(g, f, want_max,    i, x) {
    x = val[g, f, 1]
    for (i = 2; i <= runs[g]; i++)
        if (want_max ? val[g, f, i] + 0 > x + 0 : val[g, f, i] + 0 < x + 0) x = val[g, f, i]
    return x
}
function label(net, cfg,    parts, d, s, n, names) {
    split(cfg, parts, SUBSEP)
    split("backend solver intra ranks iters", names, " ")
    s = ""
    for (d = 1; d <= 5; d++) {
        n = split(dimvals[net SUBSEP d], tmp, "\035")
        if (n < 2) continue
        s = s (s == "" ? "" : " ") (d == 3 ? "intra " parts[d] : d == 4 ? parts[d] " ranks" : \
            d == 5 ? parts[d] " iters" : parts[d])
    }
    return s
}
END {
    if (bad) exit 2
    nn = split(nets["all"], netlist, "\035")
    for (a = 1; a <= nn; a++) {
        net = netlist[a]
        nc = split(cfgs[net], cfglist, "\035")
        for (c = 1; c <= nc; c++) {
            cfg = cfglist[c]
            nb = split(batches[net SUBSEP cfg], bl, "\035")
            nt = split(threads[net SUBSEP cfg], tl, "\035")
            sort_num(bl, nb)
            sort_num(tl, nt)
            for (b = 1; b <= nb; b++) {
                base = ""
                for (t = 1; t <= nt; t++) {
                    g = net SUBSEP cfg SUBSEP bl[b] SUBSEP tl[t]
                    if (!(g in runs)) continue
                    ips = median(g, "ips")
                    best = extreme(g, "ips", 1)
                    if (base == "") { base = ips; base_best = best; base_t = tl[t] }
                    # network config# label batch threads runs ips min max speedup base_threads
                    # compute barrier aggregation comm update data load best_speedup
                    printf "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%.4f\t%s", net, c, label(net, cfg),
                        bl[b], tl[t], runs[g], ips, extreme(g, "ips", 0), extreme(g, "ips", 1),
                        (base > 0 ? ips / base : 0), base_t
                    n = split("compute barrier aggregation comm update data load", fs, " ")
                    for (f = 1; f <= n; f++) printf "\t%s", median(g, fs[f])
                    printf "\t%.4f\t%s\n", (base_best > 0 ? best / base_best : 0),
                        (g in known) ? (busy[g] + 0) "/" known[g] : "-"
                }
            }
        }
    }
}
EOF
awk -F, -f "$work/columns.awk" -f "$work/points.awk" "$csv" >"$work/points.tsv" || exit 2
[ -s "$work/points.tsv" ] || die_usage "$csv has no run whose status is ok"

echo "medians over the repeats; speed-up: over the median at the fewest threads, same batch;"
echo "fastest: the fastest run over the fastest run at the fewest threads; load: median load1;"
echo "busy: the runs sweep.sh marked busy (other programs wanted the cores the run left free)"
awk -F'\t' 'BEGIN { printf "%-22s %-16s %6s %7s %4s %10s %10s %10s %8s %8s %6s %5s\n", "network",
    "configuration", "batch", "threads", "runs", "img/s", "min", "max", "speed-up", "fastest", "load",
    "busy" }
    { printf "%-22s %-16s %6s %7s %4s %10.1f %10.1f %10.1f %8.2f %8.2f %6s %5s\n", $1, $3 == "" ? "-" : $3,
        $4, $5, $6, $7, $8, $9, $10, $19, ($18 < 0 ? "-" : sprintf("%.1f", $18)), $20 }' "$work/points.tsv"
awk -F'\t' '$20 ~ /^[1-9]/ { n++ } END { if (n) printf "plot.sh: warning: %d point%s had runs on a busy machine (the busy column): their figures are slower than the machine'"'"'s\n", n, (n > 1 ? "s" : "") > "/dev/stderr" }' "$work/points.tsv"

# gp_figure NAME SCRIPT: run the gnuplot SCRIPT, which writes OUTDIR/NAME
# (and keep SCRIPT as $PLOT_SCRIPTS/NAME.gp when that folder is given).
gp_figure() {
    if [ -n "${PLOT_SCRIPTS:-}" ]; then
        cp "$2" "$PLOT_SCRIPTS/$1.gp" || exit 1
    fi
    if ! gnuplot "$2" 2>"$work/gnuplot.err"; then
        echo "plot.sh: gnuplot failed on $1:" >&2
        sed 's/^/    /' "$work/gnuplot.err" >&2
        exit 1
    fi
    [ -s "$outdir/$1" ] || { echo "plot.sh: gnuplot wrote no $outdir/$1" >&2; exit 1; }
    echo "wrote $outdir/$1"
}

# The gnuplot script of one figure of network NET from points.tsv, with the
# data inline ($blocks), printed on stdout.
cat >"$work/figure.awk" <<'EOF'
$1 != net { next }
{
    c = $2
    if (!(c in clabel)) { corder[++nc] = c; clabel[c] = $3 }
    row[++nr] = $0
    if (!((c, $4) in has_b)) { has_b[c, $4] = 1; border[c, ++nb[c]] = $4 }
    if (!((c, $5) in has_t)) { has_t[c, $5] = 1; torder[c, ++nt[c]] = $5 }
    point[c, $4, $5] = nr
    if ($20 ~ /^[1-9]/) anybusy = 1
    if ($15 + 0 > 0) has_comm = 1
    if ($9 + 0 > ipsmax) ipsmax = $9 + 0
    if ($5 + 0 > tmax) tmax = $5 + 0
    if (tmin == "" || $5 + 0 < tmin) tmin = $5 + 0
    base_t = $11
}
function panels_start(w, h,    cols, rows) {
    cols = nc < 3 ? nc : 3
    rows = int((nc + cols - 1) / cols)
    # one panel gets the width of two: the title is long
    printf "set terminal %s size %d,%d\n", term, w * (cols == 1 ? 1.6 : cols), h * rows
    printf "set output '%s'\n", out
    printf "set multiplot layout %d,%d title '%s'\n", rows, cols, title
}
function panel_title(c) { return clabel[c] == "" ? net : net ", " clabel[c] }
# 1 when a point had runs sweep.sh marked busy (the busy column "B/N", B > 0)
function busy_point(b) { return b ~ /^[1-9]/ ? 1 : 0 }
# the busy points of data block d greyed out: a grey disc over them (x and y
# the block's columns, flag the busy_point column), titled once a figure
function grey_points(d, x, y, flag,    t) {
    if (!anybusy) return ""
    t = grey_titled ? "notitle" : "title 'busy: measured while other programs wanted the cores'"
    grey_titled = 1
    return sprintf("%s using %s:($%d > 0 ? $%s : 1/0) with points pt 7 ps 2.2 lc 'grey70' %s, ", d, x, flag, y, t)
}
END {
    printf "set datafile separator whitespace\nset key top left\nset grid\n"
    if (kind == "speedup") {
        title = "speed-up over " base_t " thread" (base_t == 1 ? "" : "s") \
            " at the same batch; solid: medians of the repeats, dotted: fastest runs"
        panels_start(420, 340)
        for (i = 1; i <= nc; i++) {
            c = corder[i]
            plot = ""
            for (b = 1; b <= nb[c]; b++) {
                printf "$sp_%d_%d << EOD\n", i, b
                for (t = 1; t <= nt[c]; t++)
                    if ((c, border[c, b], torder[c, t]) in point) {
                        split(row[point[c, border[c, b], torder[c, t]]], f, "\t")
                        print f[5], f[10], f[19], busy_point(f[20])
                    }
                print "EOD"
                plot = plot sprintf("$sp_%d_%d using 1:2 with linespoints lw 2 pt 7 lc %d title 'batch %s', ", i, b, b, border[c, b])
                plot = plot sprintf("$sp_%d_%d using 1:3 with linespoints lw 1 dt 3 pt 6 lc %d notitle, ", i, b, b)
                plot = plot grey_points(sprintf("$sp_%d_%d", i, b), "1", "2", 4)
            }
            printf "set title '%s'\nset xlabel 'worker threads'\nset ylabel 'speed-up'\n", panel_title(c)
            printf "set xrange [%g:%g]\nset yrange [0:*]\nset xtics 1\n", tmin, (tmax > tmin ? tmax : tmin + 1)
            printf "plot %s x / %g with lines dt 2 lc 'grey40' title 'ideal'\n", plot, base_t
        }
    } else if (kind == "throughput") {
        title = "images/s against the batch: medians of the repeats, bars from the slowest to the fastest run"
        panels_start(420, 340)
        for (i = 1; i <= nc; i++) {
            c = corder[i]
            plot = ""
            for (t = 1; t <= nt[c]; t++) {
                printf "$tp_%d_%d << EOD\n", i, t
                for (b = 1; b <= nb[c]; b++)
                    if ((c, border[c, b], torder[c, t]) in point) {
                        split(row[point[c, border[c, b], torder[c, t]]], f, "\t")
                        print f[4], f[7], f[8], f[9], busy_point(f[20])
                    }
                print "EOD"
                plot = plot (plot == "" ? "" : ", ") sprintf("$tp_%d_%d using 1:2:3:4 with yerrorlines lw 2 pt 7 title '%s thread%s'", i, t, torder[c, t], torder[c, t] == 1 ? "" : "s")
                plot = plot ", " grey_points(sprintf("$tp_%d_%d", i, t), "1", "2", 5)
                sub(/, $/, "", plot)
            }
            xt = ""
            for (b = 1; b <= nb[c]; b++) xt = xt (xt == "" ? "" : ", ") border[c, b]
            printf "set title '%s'\nset xlabel 'batch (images per iteration)'\nset ylabel 'images/s'\nset key below\n", panel_title(c)
            # one y scale for all panels, so that they compare
            printf "set logscale x 2\nset xtics (%s)\nset xrange [%g:%g]\nset yrange [0:%g]\n", xt, border[c, 1] / 1.3, border[c, nb[c]] * 1.3, ipsmax * 1.1
            printf "plot %s\n", plot
        }
    } else if (kind == "split") {
        n = split("compute barrier aggregation communication update data", parts, " ")
        printf "$split << EOD\n"
        for (i = 1; i <= nc; i++) {
            c = corder[i]
            for (b = 1; b <= nb[c]; b++)
                for (t = 1; t <= nt[c]; t++)
                    if ((c, border[c, b], torder[c, t]) in point) {
                        split(row[point[c, border[c, b], torder[c, t]]], f, "\t")
                        lab = (clabel[c] == "" ? "" : clabel[c] " ") "b" f[4] " t" f[5]
                        bars++
                        total = 0
                        for (k = 12; k <= 17; k++) total += f[k]
                        printf "\"%s\"", lab
                        for (k = 12; k <= 17; k++) printf " %s", f[k]
                        for (k = 12; k <= 17; k++) printf " %.3f", (total > 0 ? 100 * f[k] / total : 0)
                        printf "\n"
                    }
        }
        print "EOD"
        w = 160 + 34 * bars
        printf "set terminal %s size %d,760\nset output '%s'\n", term, (w < 640 ? 640 : w), out
        printf "set multiplot layout 2,1 title \"%s: time per iteration by phase (mean of the workers, median of the repeats)\\nb: batch, t: worker threads\"\n", net
        printf "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border -1\nset boxwidth 0.75\n"
        printf "set key outside right top vertical\nset xtics rotate by -45 left\nset grid noxtics ytics\n"
        plot = ""
        for (k = 1; k <= 6; k++) {
            if (k == 4 && !has_comm) continue
            plot = plot (plot == "" ? "" : ", ") sprintf("$split using %d%s title '%s'", k + 1, plot == "" ? ":xtic(stringcolumn(1))" : "", parts[k])
        }
        printf "set ylabel 'ms per iteration'\nset yrange [0:*]\nplot %s\n", plot
        plot = ""
        for (k = 1; k <= 6; k++) {
            if (k == 4 && !has_comm) continue
            plot = plot (plot == "" ? "" : ", ") sprintf("$split using %d%s title '%s'", k + 7, plot == "" ? ":xtic(stringcolumn(1))" : "", parts[k])
        }
        printf "set ylabel 'share of the iteration, %%'\nset yrange [0:100]\nplot %s\n", plot
    }
    print "unset multiplot"
}
EOF

nets=$(cut -f1 "$work/points.tsv" | awk '!seen[$0]++')
for net in $nets; do
    for kind in speedup throughput split; do
        case " $figures " in *" $kind "*) ;; *) continue ;; esac
        awk -F'\t' -v net="$net" -v kind="$kind" -v term="$term" \
            -v out="$outdir/${kind}_$net.png" -f "$work/figure.awk" "$work/points.tsv" \
            >"$work/$kind.gp"
        gp_figure "${kind}_$net.png" "$work/$kind.gp"
    done
done

# A preset's CSV: the Speed Ratio table, ratio.png and scaling_NET.png.
if [ "$has_system" -eq 1 ]; then
    for format in md ratio points; do
        awk -F, -v format=$format -v csv="$csv" -f "$here/speed-ratio.awk" "$csv" \
            >"$work/speed-$format" || exit 2
    done
    echo
    cat "$work/speed-md"
fi
case " $figures " in
*" ratio "*)
    # a cluster per network, batch and solver (and length, if several), a
    # bar per baseline; NaN where a ratio is missing
    awk -F'\t' -v term="$term" -v out="$outdir/ratio.png" '
        {
            row = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
            if (!(row in seen)) { seen[row] = 1; rows[++n] = row }
            if (!(($1, $4) in has_len)) { has_len[$1, $4] = 1; lens[$1]++ }
            if ($5 == "singletrain") next
            if (!($5 in has_sys)) { has_sys[$5] = 1; sys[++ns] = $5 }
            if ($8 != "") { ratio[row, $5] = $8; any = 1 }
        }
        END {
            if (!any) exit 3
            print "$ratio << EOD"
            for (i = 1; i <= n; i++) {
                split(rows[i], f, SUBSEP)
                printf "\"%s b%s %s%s\"", f[1], f[2], f[3], (lens[f[1]] > 1 ? " n" f[4] : "")
                for (s = 1; s <= ns; s++)
                    printf " %s", ((rows[i], sys[s]) in ratio ? ratio[rows[i], sys[s]] : "NaN")
                printf "\n"
            }
            print "EOD"
            w = 160 + 12 * n * (ns + 1)
            printf "set terminal %s size %d,520\nset output \x27%s\x27\n", term, (w < 800 ? 800 : w), out
            printf "set title \"Speed Ratio: singletrain (one process, its best thread count) over each "
            printf "baseline (its best process count)\\nsame global batch and solver, medians of the "
            printf "runs; above 1: singletrain is faster\"\n"
            printf "set style data histograms\nset style histogram clustered gap 1\n"
            printf "set style fill solid 0.85 border -1\nset boxwidth 0.9\n"
            printf "set xtics rotate by -45 left\nset rmargin 24\nset grid noxtics ytics\nset key top right\n"
            printf "set ylabel \x27speed ratio\x27\nset yrange [0:*]\n"
            plot = ""
            for (s = 1; s <= ns; s++)
                plot = plot sprintf("$ratio using %d%s title \x27%s\x27, ", s + 1,
                    (s == 1 ? ":xtic(1)" : ""), sys[s])
            printf "plot %s1 with lines dt 2 lw 2 lc \x27grey30\x27 title \x27parity\x27\n", plot
        }' "$work/speed-ratio" >"$work/ratio.gp"
    case $? in
    0) gp_figure ratio.png "$work/ratio.gp" ;;
    3) echo "plot.sh: no Speed Ratio to draw (no point has singletrain and a baseline): no ratio.png" >&2 ;;
    *) exit 1 ;;
    esac
    ;;
esac
case " $figures " in
*" scaling "*)
    cut -f1 "$work/speed-points" | awk '!seen[$0]++' >"$work/speed-nets"
    while read -r net; do
        # a panel per batch, solver and length; a line per system
        awk -F'\t' -v net="$net" -v term="$term" -v out="$outdir/scaling_$net.png" '
            !($5 in color) { color[$5] = ++nc }
            $1 != net { next }
            {
                panel = $2 SUBSEP $3 SUBSEP $4
                if (!(panel in has_panel)) { has_panel[panel] = 1; panels[++np] = panel }
                if (!($5 in has_sys)) { has_sys[$5] = 1; sys[++ns] = $5 }
                if (!(($1, $4) in has_len)) { has_len[$1, $4] = 1; lens++ }
                data[panel, $5] = data[panel, $5] $6 " " $7 "\n"
                if ($6 + 0 > cmax) cmax = $6 + 0
            }
            END {
                cols = np < 3 ? np : 3
                rows = int((np + cols - 1) / cols)
                printf "set terminal %s size %d,%d\nset output \x27%s\x27\n", term, 380 * cols, 300 * rows, out
                printf "set multiplot layout %d,%d title \"%s: images/s against the cores, medians of the runs\\nsingletrain: worker threads of one process; baselines: processes of one thread\"\n", rows, cols, net
                printf "set grid\nset key top left\nset xtics 1\nset xrange [0.5:%g]\nset yrange [0:*]\n", cmax + 0.5
                printf "set xlabel \x27cores\x27\nset ylabel \x27images/s\x27\n"
                for (i = 1; i <= np; i++) {
                    split(panels[i], f, SUBSEP)
                    plot = ""
                    for (s = 1; s <= ns; s++) {
                        if (!((panels[i], sys[s]) in data)) continue
                        printf "$d_%d_%d << EOD\n%sEOD\n", i, s, data[panels[i], sys[s]]
                        plot = plot (plot == "" ? "" : ", ") sprintf("$d_%d_%d using 1:2 with linespoints lw 2 pt 7 lc %d title \x27%s\x27", i, s, color[sys[s]], sys[s])
                    }
                    printf "set title \x27batch %s, %s%s\x27\nplot %s\n", f[1], f[2], (lens > 1 ? ", " f[3] " iterations" : ""), plot
                }
                print "unset multiplot"
            }' "$work/speed-points" >"$work/scaling.gp"
        gp_figure "scaling_$net.png" "$work/scaling.gp"
    done <"$work/speed-nets"
    ;;
esac

case " $figures " in *" curves "*) ;; *) exit 0 ;; esac
if [ ! -d "$logdir" ]; then
    echo "plot.sh: no log directory $logdir: no training curves" >&2
    exit 0
fi

# The runs to draw per network: ok, the most iterations, run 1, the most
# threads; "network TAB label TAB log" with a label naming what varies.
cat >"$work/curves.awk" <<'EOF'
NR > 1 && v("status") == "ok" {
    net = v("network")
    r = ++n
    rnet[r] = net; riters[r] = v("iters") + 0; rrun[r] = v("run") + 0; rthreads[r] = v("threads") + 0
    rlog[r] = v("log")
    rdesc[r] = v("solver") SUBSEP "batch " v("batch") SUBSEP v("threads") " threads" SUBSEP \
        v("backend") SUBSEP "intra " v("intra") SUBSEP v("ranks") " ranks"
    if (riters[r] > most[net]) most[net] = riters[r]
}
END {
    if (bad) exit 2
    for (r = 1; r <= n; r++)
        if (riters[r] == most[rnet[r]] && (!(rnet[r] in first) || rrun[r] < first[rnet[r]]))
            first[rnet[r]] = rrun[r]
    for (r = 1; r <= n; r++)
        if (riters[r] == most[rnet[r]] && rrun[r] == first[rnet[r]] && rthreads[r] > tmost[rnet[r]])
            tmost[rnet[r]] = rthreads[r]
    for (r = 1; r <= n; r++) {
        net = rnet[r]
        if (riters[r] != most[net] || rrun[r] != first[net] || rthreads[r] != tmost[net]) continue
        pick[r] = 1
        k = split(rdesc[r], d, SUBSEP)
        for (i = 1; i <= k; i++)
            if (!((net, i, d[i]) in seen)) { seen[net, i, d[i]] = 1; nvals[net, i]++ }
    }
    for (r = 1; r <= n; r++) {
        if (!pick[r]) continue
        k = split(rdesc[r], d, SUBSEP)
        lab = ""
        for (i = 1; i <= k; i++)
            if (nvals[rnet[r], i] > 1) lab = lab (lab == "" ? "" : " ") d[i]
        printf "%s\t%s\t%s\n", rnet[r], lab == "" ? rnet[r] : lab, rlog[r]
    }
}
EOF
awk -F, -f "$work/columns.awk" -f "$work/curves.awk" "$csv" >"$work/curves.tsv" 2>"$work/curves.err" || {
    cat "$work/curves.err" >&2
    exit 2
}

# log_series LOG: "loss ITER WALL_S LOSS" per progress line and "test ITER
# WALL_S ACCURACY" per test line; wall time summed from the progress lines.
log_series() {
    awk '
        /^training: [0-9]+ iterations of batch [0-9]+/ { batch = $6 + 0 }
        /^iter [0-9]+\/[0-9]+ / {
            split($2, it, "/")
            for (i = 3; i < NF; i++) if ($i == "loss") loss = $(i + 1)
            ips = $(NF - 1) + 0
            if (ips > 0 && batch > 0) wall += (it[1] - last) * batch / ips
            last = it[1]
            print "loss", it[1], wall + 0, loss
        }
        /^test +iter [0-9]+ +accuracy / {
            acc = $5
            sub(/%$/, "", acc)
            print "test", $3, wall + 0, acc
        }
    ' "$1"
}

for net in $nets; do
    grep -q "^$net	" "$work/curves.tsv" || continue
    gp=$work/curves.gp
    k=0
    plot_loss_it='' plot_loss_wall='' plot_acc_it='' plot_acc_wall=''
    : >"$gp"
    while IFS='	' read -r n lab log; do
        [ "$n" = "$net" ] || continue
        if [ ! -r "$logdir/$log" ]; then
            echo "plot.sh: $logdir/$log is missing: left out of curves_$net.png" >&2
            continue
        fi
        log_series "$logdir/$log" >"$work/series"
        if ! grep -q '^loss' "$work/series"; then
            echo "plot.sh: $logdir/$log has no progress lines: left out of curves_$net.png" >&2
            continue
        fi
        k=$((k + 1))
        {
            echo "\$loss_$k << EOD"
            awk '$1 == "loss" { print $2, $3, $4 }' "$work/series"
            echo "EOD"
            echo "\$test_$k << EOD"
            awk '$1 == "test" { print $2, $3, $4 }' "$work/series"
            echo "EOD"
        } >>"$gp"
        sep=${plot_loss_it:+, }
        plot_loss_it="$plot_loss_it$sep\$loss_$k using 1:3 with lines lw 2 title '$lab'"
        plot_loss_wall="$plot_loss_wall$sep\$loss_$k using 2:3 with lines lw 2 title '$lab'"
        if grep -q '^test' "$work/series"; then
            sep=${plot_acc_it:+, }
            plot_acc_it="$plot_acc_it$sep\$test_$k using 1:3 with linespoints lw 2 pt 7 title '$lab'"
            plot_acc_wall="$plot_acc_wall$sep\$test_$k using 2:3 with linespoints lw 2 pt 7 title '$lab'"
        fi
    done <"$work/curves.tsv"
    [ "$k" -gt 0 ] || continue
    rows=1
    [ -n "$plot_acc_it" ] && rows=2
    {
        echo "set terminal $term size 1000,$((rows * 360))"
        echo "set output '$outdir/curves_$net.png'"
        echo "set multiplot layout $rows,2 title '$net: training loss (mean over each progress interval) and test accuracy'"
        echo "set grid"
        echo "set key top right"
        echo "set xlabel 'iteration'"
        echo "set ylabel 'training loss'"
        echo "set logscale y"
        echo "set autoscale yfix"
        echo "set ytics (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 10, 20, 50)"
        echo "plot $plot_loss_it"
        echo "set xlabel 'wall time, s'"
        echo "plot $plot_loss_wall"
        if [ -n "$plot_acc_it" ]; then
            echo "unset logscale y"
            echo "set autoscale y"
            echo "set ytics auto"
            echo "set key bottom right"
            echo "set xlabel 'iteration'"
            echo "set ylabel 'test accuracy, %'"
            echo "plot $plot_acc_it"
            echo "set xlabel 'wall time, s'"
            echo "plot $plot_acc_wall"
        fi
        echo "unset multiplot"
    } >>"$gp"
    gp_figure "curves_$net.png" "$gp"
done
