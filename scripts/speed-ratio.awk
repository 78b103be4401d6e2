# The Speed Ratio of a scripts/sweep.sh --preset singlecaffe CSV: for each
# network, global batch (batch x ranks), solver and run length, singletrain's
# best images/s over its thread counts (one process) divided by each
# baseline's best over its process counts (P processes of one thread), the
# figure of each thread or process count being the median of its runs whose
# status is ok. Columns are found by name.
#
# usage: awk -F, -v format=FORMAT [-v csv=NAME] -f scripts/speed-ratio.awk CSV
#   format=md      the table in markdown, for docs/guide/figures.md (the default)
#   format=ratio   TAB-separated: network batch solver iters system best_ips
#                  best_at ratio (ratio empty where singletrain or the
#                  baseline is missing), one line per row and system
#   format=points  TAB-separated: network batch solver iters system cores
#                  median_ips runs, one line per point (plot.sh's scaling)
# Exit status: 0, or 2 when a column is missing.
BEGIN { if (format == "") format = "md" }
NR == 1 {
    for (i = 1; i <= NF; i++) col[$i] = i
    n = split("system network threads ranks batch solver iters status images_per_s", need, " ")
    for (k = 1; k <= n; k++)
        if (!(need[k] in col)) {
            printf "speed-ratio.awk: %s: no column %s (not a --preset singlecaffe CSV?)\n",
                FILENAME, need[k] > "/dev/stderr"
            bad = 1
            exit 2
        }
    next
}
function v(name) { return $col[name] }
v("status") == "ok" {
    sys = v("system")
    row = v("network") SUBSEP v("batch") * v("ranks") SUBSEP v("solver") SUBSEP v("iters")
    if (!(row in has_row)) { has_row[row] = 1; rows[++nrows] = row }
    if (!(sys in has_sys)) { has_sys[sys] = 1; if (sys != "singletrain") systems[++nsys] = sys }
    cores = v("threads") * v("ranks")
    if (!((row, sys, cores) in runs)) cores_of[row, sys, ++ncores[row, sys]] = cores
    k = ++runs[row, sys, cores]
    val[row, sys, cores, k] = v("images_per_s") + 0
}
# median G: the median of val[G, 1 .. runs[G]].
function median(g,    n, i, j, x, a) {
    n = runs[g]
    for (i = 1; i <= n; i++) a[i] = val[g, i]
    for (i = 2; i <= n; i++) {
        x = a[i]
        for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]
        a[j + 1] = x
    }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# best ROW SYS: the best median over the thread or process counts; sets
# best_at to the count ("" when the system has no run of the row).
function best(row, sys,    c, m, b) {
    b = ""
    best_at = ""
    for (c = 1; c <= ncores[row, sys]; c++) {
        m = median(row SUBSEP sys SUBSEP cores_of[row, sys, c])
        if (b == "" || m > b) { b = m; best_at = cores_of[row, sys, c] }
    }
    return b
}
# thousands X: X rounded, with thousands separators (figures under 100 keep
# a decimal).
function thousands(x,    s, out) {
    if (x < 100) return sprintf("%.1f", x)
    s = sprintf("%.0f", x)
    out = ""
    while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    return s out
}
END {
    if (bad) exit 2
    # the fewest and most runs of one point, for the heading
    for (g in runs) {
        if (runs[g] > maxruns) maxruns = runs[g]
        if (minruns == "" || runs[g] < minruns) minruns = runs[g]
    }
    if (format == "md") {
        printf "Speed Ratio: singletrain's images/s (one process of T worker threads, the best T) "
        printf "over each baseline's (P processes of one thread, the best P), same network, "
        printf "global batch and solver; every figure is the median of %s run%s of its thread or ",
            (minruns == maxruns ? minruns : minruns "-" maxruns), (maxruns == 1 ? "" : "s")
        printf "process count%s.\n\n", (csv == "" ? "" : " (" csv ")")
        printf "| network | batch | solver | iters | singletrain img/s (T) |"
        for (s = 1; s <= nsys; s++) printf " %s img/s (P) | ratio |", systems[s]
        printf "\n|---|---|---|---|---|"
        for (s = 1; s <= nsys; s++) printf "---|---|"
        printf "\n"
    }
    for (r = 1; r <= nrows; r++) {
        row = rows[r]
        split(row, f, SUBSEP)
        ours = best(row, "singletrain")
        ours_at = best_at
        if (format == "md") {
            printf "| %s | %s | %s | %s | %s |", f[1], f[2], f[3], f[4],
                (ours == "" ? "-" : thousands(ours) " (" ours_at ")")
        } else if (format == "ratio" && ours != "") {
            printf "%s\t%s\t%s\t%s\tsingletrain\t%s\t%s\t\n", f[1], f[2], f[3], f[4], ours, ours_at
        }
        for (s = 1; s <= nsys; s++) {
            theirs = best(row, systems[s])
            ratio = ours != "" && theirs != "" && theirs > 0 ? ours / theirs : ""
            if (format == "md")
                printf " %s | %s |", (theirs == "" ? "-" : thousands(theirs) " (" best_at ")"),
                    (ratio == "" ? "-" : sprintf("%.2f", ratio))
            else if (format == "ratio" && theirs != "")
                printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f[1], f[2], f[3], f[4], systems[s],
                    theirs, best_at, (ratio == "" ? "" : sprintf("%.4f", ratio))
        }
        if (format == "md") printf "\n"
        if (format == "points") {
            systems[0] = "singletrain"
            for (s = 0; s <= nsys; s++)
                for (c = 1; c <= ncores[row, systems[s]]; c++) {
                    cc = cores_of[row, systems[s], c]
                    g = row SUBSEP systems[s] SUBSEP cc
                    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", f[1], f[2], f[3], f[4], systems[s],
                        cc, median(g), runs[g]
                }
        }
    }
}
