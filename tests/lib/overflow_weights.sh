# Sourced by the multi-node tests (not run): overflow_weights FILE writes
# tiny.cfg's weights in Darknet's format such that a gradient overflows
# while the loss stays finite: the convolution's filter 3 at 3e37 (float
# bits 0x7db48e52), the others 0, and class 0's row of the connected layer
# at 0.01: the activations of channel 3 reach about 1e38, the logits stay
# finite (so does the loss, clamped), and the connected layer's gradient
# overflows where it meets channel 3 (arena floats 88-103, 152-167 and
# 216-231).

# le32 N: N as 4 little-endian bytes.
le32() {
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) \
        $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"
}

# floats BITS N: N floats of those bits.
floats() {
    _n=$2
    while [ "$_n" -gt 0 ]; do le32 "$1"; _n=$((_n - 1)); done
}

overflow_weights() {
    {
        le32 0; le32 2; le32 0; le32 0; le32 0                    # 0.2.0, seen
        floats 0 4; floats 0 27; floats 0x7db48e52 9              # conv biases, weights
        floats 0 3; floats 0x3c23d70a 64; floats 0 128            # connected
    } >"$1"
}
