# Where the user's scripts (sweep.sh, plot.sh, predict-sw26010.sh,
# calibrate-sw26010.sh, bench*.sh) find singletrain and its data, whether
# they run from the source tree or from an installed copy, from any
# directory. Sourced by each after it sets here to its own folder with
# symbolic links resolved (PREFIX/bin/singletrain-sweep is a link to
# PREFIX/share/singletrain/scripts/sweep.sh):
#   here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
#   . "$here/paths.sh"
# It sets:
#   st_networks   the network cfgs: data/ of the sources, or the installed
#                 PREFIX/share/singletrain/networks/
#   st_sw26010    the SW26010 machine and model files: data/sw26010/, or
#                 PREFIX/share/singletrain/sw26010/
#   st_bench      the shape benchmark's cfgs: data/bench/, or
#                 PREFIX/share/singletrain/bench/
#   st_installed  1 when the scripts are the installed copies, else 0
#   bin           the binary: $SINGLETRAIN, else build/singletrain of the
#                 sources, or the installed PREFIX/bin/singletrain
# An installed copy knows itself by its folder's sibling networks/ (make
# install lays out PREFIX/share/singletrain/{scripts,networks,sw26010,bench}).
if [ -d "$here/../networks" ] && [ ! -d "$here/../data" ]; then
    st_installed=1
    st_share=$(dirname "$here")
    st_networks=$st_share/networks
    st_sw26010=$st_share/sw26010
    st_bench=$st_share/bench
    st_default_bin=$(dirname "$(dirname "$st_share")")/bin/singletrain
else
    st_installed=0
    st_networks=$(dirname "$here")/data
    st_sw26010=$st_networks/sw26010
    st_bench=$st_networks/bench
    st_default_bin=$(dirname "$here")/build/singletrain
fi
bin=${SINGLETRAIN:-$st_default_bin}
